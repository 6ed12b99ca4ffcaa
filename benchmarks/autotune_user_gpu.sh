#!/usr/bin/env bash
# autotune(...) on one lent GPU (issue 41; one device call): the GPU tests of tests/autotune/test_user_gpu.py,
# then benchmarks/autotune_user.py on the worked example (kernels/examples/autotune_convolution.py) seeded from
# the committed H100 sweep of the convolution, with a fresh cache directory of picks.
# Usage (repository root): bash benchmarks/autotune_user_gpu.sh [OUT]   (default $OUT, else /tmp/out)
# Dry run: DRY_RUN=1 (no GPU: the tests skipped, the table and the kernel spec checked)
set -uo pipefail
OUT=${1:-${OUT:-/tmp/out}}; mkdir -p "$OUT"
source benchmarks/gpu_setup.sh  # wheels, PYTHONPATH, nvidia-smi.txt, device.json
XDG_CACHE_HOME=$(mktemp -d); export XDG_CACHE_HOME  # no picks from an earlier run
date -u +"start %Y-%m-%dT%H:%M:%SZ" | tee "$OUT/run.log"
[ -n "$DRY" ] || python3 -m pytest -q -p no:cacheprovider tests/autotune/test_user_gpu.py tests/autotune/test_user.py \
  2>&1 | tail -n 15 | tee -a "$OUT/run.log"
python3 -m benchmarks.autotune_user --table data/convolution/h100/sweep --out "$OUT" $DRY 2>&1 | tee -a "$OUT/run.log"
status=${PIPESTATUS[0]}
date -u +"end %Y-%m-%dT%H:%M:%SZ rc=$status" | tee -a "$OUT/run.log"
exit "$status"
