#!/usr/bin/env bash
# Energy on one lent GPU (issue 44), the second call: the convolution example swept for time and energy
# (benchmarks/energy_convolution.py, a larger sample), then searched live end to end under
# objective {minimize: energy_mJ} (a copy of convolution.yaml with that objective, its source copied beside
# it: a kernel spec reads only files in its own folder; benchmarks/live_search.py, evolve), its picks
# re-measured on energy in interleaved rounds. Run from the repository root with the wheels installed and
# PYTHONPATH set. Everything lands in $OUT.
#   SAMPLES (64) BUDGET (30) SEEDS (0,1)
# Dry run: DRY_RUN=1 (no GPU: the energy sample planned, the energy spec written and checked, its searches planned)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source benchmarks/gpu_setup.sh
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy-objective}
E=$SCRATCH/energy
{ date -u +"start %Y-%m-%dT%H:%M:%SZ"; } > "$OUT/run.log"
timeout 100 python3 -m benchmarks.energy_convolution --out "$OUT" --samples "${SAMPLES:-64}" --rounds 7 $DRY \
  >> "$OUT/run.log" 2>&1
status=$?
echo "energy rc=$status $(date -u +%H:%M:%S)" >> "$OUT/run.log"
rm -rf "$E"; mkdir -p "$E"
cp kernels/examples/convolution.cu "$E/"  # beside the spec: its `source: convolution.cu` stays as it is
cp kernels/examples/convolution.yaml "$E/convolution_energy.yaml"
echo "objective: {minimize: energy_mJ}" >> "$E/convolution_energy.yaml"
sed -e "s#spec: ../../kernels/examples/convolution.yaml.*#spec: convolution_energy.yaml#" \
  -e "s#^name: kernel_convolution#name: kernel_convolution_energy#" \
  cluster_configs/sweeps/kernel_convolution.yaml > "$E/sweep.yaml"
cp "$E/convolution_energy.yaml" "$E/sweep.yaml" "$OUT"/
timeout 120 python3 -m benchmarks.live_search --spec "$E/sweep.yaml" --strategies evolve \
  --budgets "${BUDGET:-30}" --seeds "${SEEDS:-0,1}" --rounds 7 --out "$E/live" $DRY >> "$OUT/run.log" 2>&1
rc=$?; [ $rc = 0 ] || status=$rc
echo "energy search rc=$rc $(date -u +%H:%M:%S)" >> "$OUT/run.log"
for f in summary.md remeasure.json searches.jsonl; do cp "$E/live/$f" "$OUT/energy_search_$f" 2>/dev/null; done
python3 - "$E/live" >> "$OUT/run.log" 2>&1 <<'PY'
import glob, sys
import pandas as pd
frames = [pd.read_parquet(d) for d in glob.glob(f"{sys.argv[1]}/*/merged")]
if frames:
    m = pd.concat(frames)
    ok = m[m.status == "ok"]
    print("energy search rows:", len(m), "ok:", len(ok), "columns:", [c for c in m.columns if c in ("objective", "energy_mJ", "power_W")])
    print(ok.sort_values("objective")[["total_ms", "energy_mJ", "power_W", "objective"]].head(5).to_string())
PY
tail -30 "$OUT/run.log"
exit $status
