#!/usr/bin/env bash
# One GPU call for issue 21's streamed stage 2: every tridiagonal GPU test (the staged reduced levels are now the
# default of every device path; the streamed pipeline against the plain one and the numpy reference), then the
# host-to-host benchmark (streamed / ordered / the previous pipeline / gtsv2 / the serial transfer floor,
# interleaved, 95% intervals). Writes gpu_tests.log, bench.log and the benchmark's files under $OUT.
#   LAUNCHTUNE_COMMIT=$(git rev-parse --short HEAD) bash lab/tridiag_streamed_gpu.sh [--sizes ...]
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/tridiag_streamed}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; nproc; } >"$OUT/bench.log" 2>&1
timeout "${TESTS_TIMEOUT:-240}" python3 -m pytest -q -p no:cacheprovider -m gpu tests/tridiag 2>&1 \
  | tee "$OUT/gpu_tests.log"
timeout "${BENCH_TIMEOUT:-300}" python3 -m benchmarks.tridiag_streamed --out "$OUT" "$@" 2>&1 \
  | tee -a "$OUT/bench.log"
