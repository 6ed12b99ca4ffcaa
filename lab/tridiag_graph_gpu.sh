#!/usr/bin/env bash
# One GPU call for issue 21's CUDA-graph path: the GPU tests of the device-resident solve (graph and launch by
# launch, vs the numpy reference on random sizes, m and threads; errors), the graph cache's CPU tests, then the
# device-resident benchmark (plain vs graph vs gtsv2_nopivot, interleaved, 95% intervals). Writes gpu_tests.log,
# bench.log and the benchmark's files under $OUT.
#   LAUNCHTUNE_COMMIT=$(git rev-parse --short HEAD) bash lab/tridiag_graph_gpu.sh
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/tridiag_graph}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; nproc; } >"$OUT/bench.log" 2>&1
timeout "${TESTS_TIMEOUT:-120}" python3 -m pytest -q -p no:cacheprovider tests/tridiag/test_graph_cache.py \
  tests/tridiag/test_gpu.py -k "graph or solve_device or device_gtsv" 2>&1 | tee "$OUT/gpu_tests.log"
timeout "${BENCH_TIMEOUT:-200}" python3 -m lab.tridiag_device_graph --out "$OUT" "$@" 2>&1 \
  | tee -a "$OUT/bench.log"
