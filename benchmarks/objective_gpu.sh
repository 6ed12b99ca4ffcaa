#!/usr/bin/env bash
# The user's objective on one lent GPU, in one call (issue 44): (1) the heat example (temporal tiling,
# objective minimize ms_per_step): its GPU tests, every one-step-per-launch configuration measured, then ours
# live (evolve) against Kernel Tuner 1.5 live (kt:genetic_algorithm, kt:random_sample) with the same objective,
# budget, seeds and card (benchmarks/live_search.py), every pick re-measured in interleaved rounds against the
# fastest one-step configurations; (2) energy: the convolution example under minimize time and minimize
# energy_mJ (benchmarks/energy_convolution.py). Run from the repository root with the wheels installed and
# PYTHONPATH set (benchmarks/gpu_setup.sh). Everything lands in $OUT.
#   SEEDS (0,1,2) BUDGET (100) SEARCH_S (220: no search starts after this) ROUNDS (11) ENERGY (1; 0 skips (2))
# Dry run: DRY_RUN=1 (no GPU: the GPU tests skipped, the heat space and the searches planned, specs checked)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source benchmarks/gpu_setup.sh
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy-objective}
REF=launchtune.kernels.examples.heat:reference
{ date -u +"start %Y-%m-%dT%H:%M:%SZ"; git rev-parse HEAD 2>/dev/null || true; } > "$OUT/run.log"
status=0
if [ -z "$DRY" ]; then
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernel/test_heat.py tests/kernel/test_gpu.py \
    >> "$OUT/run.log" 2>&1
  status=$?
  echo "gpu tests rc=$status" >> "$OUT/run.log"
fi
HEAT=$SCRATCH/heat; rm -rf "$HEAT"
python3 -m benchmarks.heat_one_step --out "$HEAT" $DRY >> "$OUT/run.log" 2>&1
rc=$?; [ $rc = 0 ] || status=$rc
echo "heat one step rc=$rc" >> "$OUT/run.log"
cp "$HEAT/one_step.json" "$OUT/" 2>/dev/null
DIR=$SCRATCH/live_search_heat; rm -rf "$DIR"
timeout 330 python3 -m benchmarks.live_search --spec cluster_configs/sweeps/kernel_heat.yaml \
  --reference-configs "$HEAT/one_step.json" --top-rows 3 \
  --strategies evolve,kt:genetic_algorithm,kt:random_sample --budgets "${BUDGET:-100}" \
  --seeds "${SEEDS:-0,1,2}" --max-seconds "${SEARCH_S:-220}" --rounds "${ROUNDS:-11}" --out "$DIR" $DRY \
  >> "$OUT/run.log" 2>&1
rc=$?; [ $rc = 0 ] || status=$rc
echo "live search rc=$rc $(date -u +%H:%M:%S)" >> "$OUT/run.log"
cp "$DIR"/summary.md "$DIR"/remeasure.json "$DIR"/searches.jsonl "$OUT"/ 2>/dev/null
if [ "${ENERGY:-1}" = 1 ]; then
  timeout 80 python3 -m benchmarks.energy_convolution --out "$OUT" --samples 32 --rounds 7 $DRY >> "$OUT/run.log" 2>&1
  rc=$?; [ $rc = 0 ] || status=$rc
  echo "energy rc=$rc $(date -u +%H:%M:%S)" >> "$OUT/run.log"
fi
tail -40 "$OUT/run.log"
exit $status
