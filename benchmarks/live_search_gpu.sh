#!/usr/bin/env bash
# Live searches on one lent GPU against the committed fused CFD sweep of that card (issue "tune live with a
# budget"): benchmarks/live_search.py runs each (strategy, budget, seed) through the live path of
# `launchtune sweep --strategy` on one local cluster (the workload built and compiled once), then
# re-measures every pick and the reference sweep's fastest rows in interleaved rounds in the same call.
# Run from the repository root with the dask/distributed/skops wheels in .whl. Everything lands in $OUT:
# live.log, summary.md, remeasure.json, searches.jsonl, nvidia-smi.txt, device.json, searches.tar.gz (the
# search folders: shards merged, journals).
#   STRATEGIES (evolve,iterative) BUDGETS (100,200) SEEDS (0,1,2,3,4) REFERENCE (data/cfd/h100/sweep_fused_arith)
#   ROUNDS (11) TOP_ROWS (5) POOL (the CLI's 50,000 candidates) LIMIT_S (560: the python part's time limit)
#   EXTRA (more searches, e.g. transfer@20) PRIOR (recorded data for transfer)
#   PER_CARD=1: one process per visible card, each running every N-th search of the list on its own card
#   (--shard), in parallel; each pick is re-measured against the reference rows on its own card; the
#   per-card logs (live-card<k>.log) travel in searches.tar.gz, so $OUT keeps to 7 files
# Measured (data/cfd/h100/live_search/cards4): on an H100 a search of iterative takes 12-14 s at 100 or 200,
# evolve 33 s at 100 and 45 s at 200 (about 30 ms a measurement; the rest is the strategy's model fits on the
# host over the 50,000-candidate pool), plus about 70 s once per process to compile the fused variants
# (cold). The defaults (2 x 2 x 5 searches) take about 260 s with PER_CARD=1 on four cards; on one card split
# them over calls, e.g. STRATEGIES=iterative, then STRATEGIES=evolve (each call re-measures its own picks
# against the same reference rows). Without PER_CARD, every visible card of the class serves each search (one
# worker each): CUDA_VISIBLE_DEVICES=0 against 0,1,2,3 gives the same search on 1 and on 4 cards.
# Dry run: DRY_RUN=1 (no GPU: the searches planned, their specs and the reference checked)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source benchmarks/gpu_setup.sh  # wheels, PYTHONPATH, nvidia-smi.txt, device.json
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1  # the strategies' model fits on one BLAS thread
DIR=$SCRATCH/live_search
rm -rf "$DIR"; mkdir -p "$DIR"
{ date -u +"start %Y-%m-%dT%H:%M:%SZ"; git rev-parse HEAD 2>/dev/null || true; } > "$OUT/live.log"
ARGS=(--reference "${REFERENCE:-data/cfd/h100/sweep_fused_arith}" \
  --strategies "${STRATEGIES:-evolve,iterative}" --budgets "${BUDGETS:-100,200}" --seeds "${SEEDS:-0,1,2,3,4}" \
  ${EXTRA:+--extra "$EXTRA"} ${PRIOR:+--prior "$PRIOR"} \
  --rounds "${ROUNDS:-11}" --top-rows "${TOP_ROWS:-5}" ${POOL:+--pool "$POOL"})
if [ "${PER_CARD:-0}" = 1 ]; then
  # one process per visible card, each with every N-th search of the list, in parallel; then one summary
  ALL=${CUDA_VISIBLE_DEVICES:-$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | paste -sd,)}
  IFS=, read -ra CARDS <<< "${ALL:-0}"
  N=${#CARDS[@]}; DIRS=()
  for k in "${!CARDS[@]}"; do
    DIRS+=("$DIR/card$k")
    CUDA_VISIBLE_DEVICES=${CARDS[$k]} timeout "${LIMIT_S:-560}" python3 -m benchmarks.live_search "${ARGS[@]}" \
      --shard "$k/$N" --out "$DIR/card$k" $DRY > "$DIR/live-card$k.log" 2>&1 &
  done
  wait
  python3 -m benchmarks.live_search --join "${DIRS[@]}" --out "$DIR" $DRY >> "$OUT/live.log" 2>&1
  status=$?
  cat "$DIR"/card*/searches.jsonl > "$DIR/searches.jsonl" 2>/dev/null
else
  timeout "${LIMIT_S:-560}" python3 -m benchmarks.live_search "${ARGS[@]}" --out "$DIR" $DRY >> "$OUT/live.log" 2>&1
  status=$?
fi
date -u +"end %Y-%m-%dT%H:%M:%SZ rc=$status" >> "$OUT/live.log"
cp "$DIR"/summary.md "$DIR"/remeasure.json "$DIR"/searches.jsonl "$OUT"/ 2>/dev/null
tar -C "$(dirname $DIR)" --exclude .dask --exclude shards -czf "$OUT/searches.tar.gz" "$(basename $DIR)"
tail -30 "$OUT/live.log"
exit $status
