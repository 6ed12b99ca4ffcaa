#!/usr/bin/env bash
# Nsight Compute on the fused stage kernel (issue 16): where a stage's time goes, for the configurations named
# below. One stage of the fifth step (not the first stage, which also computes dt; not the last, which also
# stores U0) at 3328x1024 on the inlet; --clock-control none leaves the card's clocks alone.
#   OUT=dir bash lab/cfd_fused_ncu.sh      # results in $OUT/ncu.tar.gz (.ncu-rep, details, raw, SASS)
# ONLY=name profiles one of the configurations; SOURCE=1 adds the per-instruction counters (SASS page).
set -euo pipefail
OUT=${OUT:?set OUT to a folder}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | tail -1)
BEST='"fusion": 2, "tile.block_x": 256, "tile.block_y": 2, "tile.cells_x": 1, "tile.cells_y": 2, "tile.smem": 0, "tile.faces": 1, "tile.maxreg": 64'
MARCH='"fusion": 2, "tile.block_x": 32, "tile.block_y": 2, "tile.cells_x": 1, "tile.cells_y": 4, "tile.smem": 1, "tile.faces": 2, "tile.maxreg": 96'
R80='"fusion": 2, "tile.block_x": 256, "tile.block_y": 1, "tile.cells_x": 1, "tile.cells_y": 4, "tile.smem": 0, "tile.faces": 1, "tile.maxreg": 80'
declare -A CONFIGS=(
    [best_arith1]="{$BEST, \"tile.arith\": 1}"
    [best_arith0]="{$BEST, \"tile.arith\": 0}"
    [march_arith1]="{$MARCH, \"tile.arith\": 1}"
    [r80_arith1]="{$R80, \"tile.arith\": 1}"
)
SECTIONS=(SpeedOfLight Occupancy LaunchStats WarpStateStats ComputeWorkloadAnalysis MemoryWorkloadAnalysis
    MemoryWorkloadAnalysis_Tables InstructionStats SchedulerStats)
[ "${SOURCE:-0}" = 1 ] && SECTIONS+=(SourceCounters)
mkdir -p "$OUT/ncu"
for name in ${ONLY:-${!CONFIGS[@]}}; do
    "$NCU" --clock-control none -k stage_fused --launch-skip 13 --launch-count 1 \
        $(printf -- '--section %s ' "${SECTIONS[@]}") -f -o "$OUT/ncu/$name" \
        python3 -m lab.cfd_profile fused --config "${CONFIGS[$name]}" >"$OUT/ncu/$name.log" 2>&1
    "$NCU" --import "$OUT/ncu/$name.ncu-rep" --page details --csv >"$OUT/ncu/$name.csv"
    "$NCU" --import "$OUT/ncu/$name.ncu-rep" --page details >"$OUT/ncu/$name.txt"
    "$NCU" --import "$OUT/ncu/$name.ncu-rep" --page raw --csv >"$OUT/ncu/$name.raw.csv" || true
    [ "${SOURCE:-0}" = 1 ] && { "$NCU" --import "$OUT/ncu/$name.ncu-rep" --page source --csv --print-source sass \
        >"$OUT/ncu/$name.sass.csv" 2>&1 || true; }
done
tar -czf "$OUT/ncu.tar.gz" -C "$OUT" ncu && rm -rf "$OUT/ncu"
