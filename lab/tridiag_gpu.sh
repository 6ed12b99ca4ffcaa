#!/usr/bin/env bash
# One GPU call for issue 21: the tridiagonal GPU tests, then the full benchmark (seed sizes 10^3..10^8, stage 2 on
# the host and on the device, 1..32 streams, gtsv2, the copy floor, the device-resident comparison, tuning, the
# stage-2-alone comparison, 2.5 x 10^8). Writes gpu_tests.log, bench.log and the benchmark's files under $OUT.
#   LAUNCHTUNE_COMMIT=$(git rev-parse --short HEAD) bash lab/tridiag_gpu.sh
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/tridiag_gpu}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; nproc; free -g; } \
  >"$OUT/bench.log" 2>&1
timeout "${TESTS_TIMEOUT:-150}" python3 -m pytest -q -m gpu -p no:cacheprovider tests/tridiag 2>&1 \
  | tee "$OUT/gpu_tests.log"
timeout "${BENCH_TIMEOUT:-330}" python3 -m benchmarks.tridiag_streams --out "$OUT" --beyond 2.5e8 "$@" 2>&1 \
  | tee -a "$OUT/bench.log"
