#!/usr/bin/env bash
# The same live search on one card and on every card of a multi-GPU host (issue "tune live with a budget": the
# same quality, a shorter wall time): benchmarks/live_search.py runs STRATEGY at BUDGET for each of SEEDS first
# with CUDA_VISIBLE_DEVICES=<the first card> (one worker), then with every card visible (one worker per card, the
# strategy's proposals in flight on all of them), each run with its own empty CuPy kernel cache so neither finds
# the other's compiles. Each run re-measures its picks against REFERENCE's fastest rows on one of its cards; the
# summary joins both (a row per number of cards). Run from the repository root with the wheels in .whl.
#   SPEC (cluster_configs/sweeps/kernel_convolution.yaml) REFERENCE (data/convolution/h100/sweep)
#   STRATEGY (evolve) BUDGET (200) SEEDS (0,1,2) ROUNDS (11) LIMIT_S (270: each run's time limit)
# Everything lands in $OUT: live.log, live-1.log, live-all.log, summary.md, remeasure.json, searches.jsonl,
# nvidia-smi.txt, device.json.
# Dry run: DRY_RUN=1 (no GPU: both runs' searches planned and their specs checked)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source benchmarks/gpu_setup.sh  # wheels, PYTHONPATH, nvidia-smi.txt, device.json
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1  # the strategies' model fits on one BLAS thread
ALL=${CUDA_VISIBLE_DEVICES:-$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | paste -sd,)}
ALL=${ALL:-0}
DIR=$SCRATCH/live_search_cards
rm -rf "$DIR" "$SCRATCH/cupy-cache-1" "$SCRATCH/cupy-cache-all"
ARGS=(--spec "${SPEC:-cluster_configs/sweeps/kernel_convolution.yaml}" --reference "${REFERENCE-data/convolution/h100/sweep}"
  --strategies "${STRATEGY:-evolve}" --budgets "${BUDGET:-200}" --seeds "${SEEDS:-0,1,2}" --rounds "${ROUNDS:-11}")
{ date -u +"start %Y-%m-%dT%H:%M:%SZ"; git rev-parse HEAD 2>/dev/null || true; echo "cards: ${ALL%%,*} then $ALL"; } \
  > "$OUT/live.log"
CUPY_CACHE_DIR=$SCRATCH/cupy-cache-1 CUDA_VISIBLE_DEVICES=${ALL%%,*} timeout "${LIMIT_S:-270}" \
  python3 -m benchmarks.live_search "${ARGS[@]}" --out "$DIR/one" $DRY > "$OUT/live-1.log" 2>&1
status=$?
CUPY_CACHE_DIR=$SCRATCH/cupy-cache-all CUDA_VISIBLE_DEVICES=$ALL timeout "${LIMIT_S:-270}" \
  python3 -m benchmarks.live_search "${ARGS[@]}" --out "$DIR/all" $DRY > "$OUT/live-all.log" 2>&1
rc=$?; [ $rc = 0 ] || status=$rc
python3 -m benchmarks.live_search --join "$DIR/one" "$DIR/all" --out "$DIR" $DRY >> "$OUT/live.log" 2>&1
rc=$?; [ $rc = 0 ] || status=$rc
date -u +"end %Y-%m-%dT%H:%M:%SZ rc=$status" >> "$OUT/live.log"
cat "$DIR"/one/searches.jsonl "$DIR"/all/searches.jsonl > "$OUT/searches.jsonl" 2>/dev/null
cp "$DIR"/summary.md "$DIR"/remeasure.json "$OUT"/ 2>/dev/null
tail -12 "$OUT/live.log"
exit $status
