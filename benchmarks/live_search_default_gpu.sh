#!/usr/bin/env bash
# The default search (`evolve`) live at 200 measurements on one lent GPU, five seeds on each of two spaces
# (issue 45: its worst seed within 5% of the optimum): the fused CFD space against the card's committed sweep
# (data/cfd/h200/sweep_fused_arith on an H200, else data/cfd/h100/sweep_fused_arith; REFERENCE overrides) and the example convolution against its H100 brute force (as
# benchmarks/live_search_convolution_gpu.sh). Each part re-measures every pick and the reference sweep's fastest
# rows in interleaved rounds (benchmarks/live_search.py); `--max-seconds` starts no search past its share, so a
# slow card drops whole seeds and still re-measures what it has. Run from the repository root with the wheels
# in .whl (dask, distributed, skops). Everything lands in $OUT/cfd and $OUT/convolution (each: live.log,
# summary.md, remeasure.json) and $OUT (nvidia-smi.txt, device.json).
#   SEEDS (0,1,2,3,4) BUDGETS (200) ROUNDS (7) CFD_S (240) CONVOLUTION_S (100): seconds after which a part
#   starts no further search; PARTS ("cfd convolution"): which parts to run
# Budget: about 8 minutes of one H100. Measured before (data/cfd/h100/live_search/cards4 and
# data/convolution/h200x4/live_search_cards): evolve at 200 takes about 45 s a search on the fused CFD space
# plus about 70 s once to compile its fused variants, and about 25 s a search on the convolution, compiling
# included; each re-measure about half a minute.
# Dry run: DRY_RUN=1 (no GPU: each part's searches planned, their specs and the reference checked)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source benchmarks/gpu_setup.sh  # wheels, PYTHONPATH, nvidia-smi.txt, device.json
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1  # the strategies' model fits on one BLAS thread
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy-kernel-convolution}
COMMON=(--strategies evolve --budgets "${BUDGETS:-200}" --seeds "${SEEDS:-0,1,2,3,4}" --rounds "${ROUNDS:-7}")
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$CARD" in *H200*) CFD_REFERENCE=data/cfd/h200/sweep_fused_arith ;; *) CFD_REFERENCE=data/cfd/h100/sweep_fused_arith ;; esac
CFD_REFERENCE=${REFERENCE:-$CFD_REFERENCE}
status=0
for part in ${PARTS:-cfd convolution}; do
  DIR=$SCRATCH/live_search_default/$part
  rm -rf "$DIR"; mkdir -p "$OUT/$part"
  if [ "$part" = cfd ]; then
    WHAT=(--reference "$CFD_REFERENCE" --max-seconds "${CFD_S:-240}")
  else
    WHAT=(--spec cluster_configs/sweeps/kernel_convolution.yaml --reference data/convolution/h100/sweep
      --max-seconds "${CONVOLUTION_S:-100}")
  fi
  { date -u +"start %Y-%m-%dT%H:%M:%SZ"; git rev-parse HEAD 2>/dev/null || true; } > "$OUT/$part/live.log"
  python3 -m benchmarks.live_search "${WHAT[@]}" "${COMMON[@]}" --out "$DIR" $DRY >> "$OUT/$part/live.log" 2>&1
  rc=$?; [ $rc = 0 ] || status=$rc
  date -u +"end %Y-%m-%dT%H:%M:%SZ rc=$rc" >> "$OUT/$part/live.log"
  cp "$DIR"/summary.md "$DIR"/remeasure.json "$OUT/$part"/ 2>/dev/null  # remeasure.json holds every search's record
  tail -15 "$OUT/$part/live.log"
done
exit $status
