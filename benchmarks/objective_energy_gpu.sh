#!/usr/bin/env bash
# Energy on one lent GPU (issue 44), the second call: the convolution example swept for time and energy
# (benchmarks/energy_convolution.py, a larger sample), then searched live end to end under
# objective {minimize: energy_mJ} (a copy of convolution.yaml with that objective; benchmarks/live_search.py,
# evolve), its picks re-measured on energy in interleaved rounds. Run from the repository root with the wheels
# installed and PYTHONPATH set. Everything lands in $OUT.
#   SAMPLES (64) BUDGET (30) SEEDS (0,1)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source benchmarks/gpu_setup.sh
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy-objective}
{ date -u +"start %Y-%m-%dT%H:%M:%SZ"; } > "$OUT/run.log"
timeout 100 python3 -m benchmarks.energy_convolution --out "$OUT" --samples "${SAMPLES:-64}" --rounds 7 \
  >> "$OUT/run.log" 2>&1
echo "energy rc=$? $(date -u +%H:%M:%S)" >> "$OUT/run.log"
mkdir -p /tmp/energy
sed -e "s#^source: convolution.cu#source: $PWD/kernels/examples/convolution.cu#" kernels/examples/convolution.yaml \
  > /tmp/energy/convolution_energy.yaml
echo "objective: {minimize: energy_mJ}" >> /tmp/energy/convolution_energy.yaml
sed -e "s#spec: ../../kernels/examples/convolution.yaml.*#spec: /tmp/energy/convolution_energy.yaml#" \
  -e "s#^name: kernel_convolution#name: kernel_convolution_energy#" \
  cluster_configs/sweeps/kernel_convolution.yaml > /tmp/energy/sweep.yaml
cp /tmp/energy/convolution_energy.yaml /tmp/energy/sweep.yaml "$OUT"/
timeout 120 python3 -m benchmarks.live_search --spec /tmp/energy/sweep.yaml --strategies evolve \
  --budgets "${BUDGET:-30}" --seeds "${SEEDS:-0,1}" --rounds 7 --out /tmp/energy/live >> "$OUT/run.log" 2>&1
echo "energy search rc=$? $(date -u +%H:%M:%S)" >> "$OUT/run.log"
for f in summary.md remeasure.json searches.jsonl; do cp /tmp/energy/live/$f "$OUT/energy_search_$f" 2>/dev/null; done
python3 - >> "$OUT/run.log" 2>&1 <<'PY'
import pandas as pd, glob
frames = [pd.read_parquet(d) for d in glob.glob("/tmp/energy/live/*/merged")]
if frames:
    m = pd.concat(frames)
    ok = m[m.status == "ok"]
    print("energy search rows:", len(m), "ok:", len(ok), "columns:", [c for c in m.columns if c in ("objective", "energy_mJ", "power_W")])
    print(ok.sort_values("objective")[["total_ms", "energy_mJ", "power_W", "objective"]].head(5).to_string())
PY
tail -30 "$OUT/run.log"
