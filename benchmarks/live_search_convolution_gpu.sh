#!/usr/bin/env bash
# The example convolution kernel (the `kernel` workload, kernels/examples/convolution.yaml, 4096x4096) searched
# live on one lent GPU: ours against Kernel Tuner 1.5's own tune_kernel (kt:genetic_algorithm, kt:random_sample)
# at the same budgets, seeds and card, in one call, every pick re-measured in interleaved rounds in the same
# call (benchmarks/live_search.py). With HUB (a folder holding the Benchmark Hub's six convolution caches,
# carried to the machine) `transfer` from them joins (TRANSFER: transfer@20,transfer@50). REFERENCE (default
# data/convolution/h100/sweep, the whole space measured on an H100: its brute force) gives the rows every pick is
# compared with, re-measured in the same call; REFERENCE= (empty) compares with the fastest pick instead.
# Run from the repository root with the wheels in .whl (dask, distributed,
# skops, kernel_tuner). Everything lands in $OUT: live.log, summary.md, remeasure.json, searches.jsonl,
# nvidia-smi.txt, device.json, searches.tar.gz (each search's folder without its shards: journal, plan).
#   STRATEGIES (evolve,kt:genetic_algorithm,kt:random_sample) BUDGETS (20,50,100) SEEDS (0,1,2,3,4)
#   ROUNDS (11) LIMIT_S (560)
# Compiling is the slow part here (NVRTC, about 0.5-1 s a configuration, each once per machine:
# CUPY_CACHE_DIR); split the seeds or strategies over calls where one call is not enough.
# Dry run: DRY_RUN=1 (no GPU: the searches planned, their specs and the reference checked)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source benchmarks/gpu_setup.sh  # wheels, PYTHONPATH, nvidia-smi.txt, device.json
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1  # the strategies' model fits on one BLAS thread
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy-kernel-convolution}
DIR=$SCRATCH/live_search_convolution
rm -rf "$DIR"
REFERENCE=${REFERENCE-data/convolution/h100/sweep}
WHAT=(--spec cluster_configs/sweeps/kernel_convolution.yaml)
if [ -n "$REFERENCE" ]; then WHAT+=(--reference "$REFERENCE"); fi
if [ -n "${HUB:-}" ]; then EXTRA=(--extra "${TRANSFER:-transfer@20,transfer@50}" --prior "$HUB"); else EXTRA=(); fi
{ date -u +"start %Y-%m-%dT%H:%M:%SZ"; git rev-parse HEAD 2>/dev/null || true; } > "$OUT/live.log"
timeout "${LIMIT_S:-560}" python3 -m benchmarks.live_search "${WHAT[@]}" "${EXTRA[@]}" \
  --strategies "${STRATEGIES:-evolve,kt:genetic_algorithm,kt:random_sample}" --budgets "${BUDGETS:-20,50,100}" \
  --seeds "${SEEDS:-0,1,2,3,4}" --rounds "${ROUNDS:-11}" --out "$DIR" $DRY >> "$OUT/live.log" 2>&1
status=$?
date -u +"end %Y-%m-%dT%H:%M:%SZ rc=$status" >> "$OUT/live.log"
cp "$DIR"/summary.md "$DIR"/remeasure.json "$DIR"/searches.jsonl "$OUT"/ 2>/dev/null
tar -C "$(dirname $DIR)" --exclude .dask --exclude shards --exclude merged -czf "$OUT/searches.tar.gz" "$(basename $DIR)"
tail -30 "$OUT/live.log"
exit $status
