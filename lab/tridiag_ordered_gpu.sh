#!/usr/bin/env bash
# One GPU call for issue 21's ordered copies: the GPU tests this work touched (CUDA-graph solve, solve_device,
# ordered copies vs the numpy reference on random sizes/m/threads/chunk counts, errors) and their CPU tests, then
# the host-to-host benchmark (ordered vs per-chunk streams vs the serial transfer floor, interleaved, 95%
# intervals). Writes gpu_tests.log, bench.log and the benchmark's files under $OUT.
#   LAUNCHTUNE_COMMIT=$(git rev-parse --short HEAD) bash lab/tridiag_ordered_gpu.sh
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/tridiag_ordered}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; nproc; } >"$OUT/bench.log" 2>&1
timeout "${TESTS_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider tests/tridiag/test_graph_cache.py \
  tests/tridiag/test_reduced.py tests/tridiag/test_gpu.py -k "graph or solve_device or device_gtsv or ordered or copies" \
  2>&1 | tee "$OUT/gpu_tests.log"
timeout "${BENCH_TIMEOUT:-200}" python3 -m lab.tridiag_ordered_copies --out "$OUT" "$@" 2>&1 \
  | tee -a "$OUT/bench.log"
