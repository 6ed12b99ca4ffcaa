#!/usr/bin/env bash
# Issue 16 on one lent GPU, one call: the GPU tests (fused vs seven kernels on random tiles after 100 steps, the
# MMS order on the fused path, and the seven-kernel tests unchanged), lab/cfd_arith.py (the best fused
# tiles against the seven-kernel default, interleaved; it also compiles every fused variant, about 150 s cold,
# so the sweep after it compiles nothing), optionally the fusion-level benchmark, then the fused sweep through
# the pipeline (lab/cfd_sweep_on_gpu.sh, MINUTES of measuring; the same command again on the same warm
# machine measures what a time limit left out). Run from the repository root with the dask/distributed/skops
# wheels in .whl. Files in $OUT (8 at most come back): fused.log (tests and benchmarks), arith.tar.gz, and those
# of cfd_sweep_on_gpu.sh. TESTS=0 skips the tests, STEP=1 adds `cfd_step --fused $FUSED` (about 240 s),
# MINUTES=0 skips the sweep. On a fresh machine TESTS=0 MINUTES=2 SWEEP_LIMIT_S=320 fits one 10-minute call.
# Until 2026-11-25 the script always ran cfd_step and no cfd_arith (the runs in data/cfd/*/fused_step and
# sweep_fused): STEP=1 gives those steps again.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
LOG="$OUT/fused.log"
{
  date -u +"start %Y-%m-%dT%H:%M:%SZ"; git rev-parse HEAD 2>/dev/null || true
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  python3 -c "import cupy; print('cupy', cupy.__version__, 'runtime', cupy.cuda.runtime.runtimeGetVersion())"
  t=$(date +%s)
  [ "${TESTS:-1}" = 0 ] || timeout 300 python3 -m pytest -q -m gpu tests/cfd/test_fused_gpu.py tests/cfd/test_gpu.py -p no:cacheprovider 2>&1 | tail -15
  echo "gpu tests rc=${PIPESTATUS[0]} in $(( $(date +%s) - t )) s"
  t=$(date +%s)
  timeout 240 python3 -m lab.cfd_arith --out /tmp/arith --rounds 21 2>&1 | tail -16
  echo "cfd_arith rc=${PIPESTATUS[0]} in $(( $(date +%s) - t )) s"
  tar -czf "$OUT/arith.tar.gz" -C /tmp arith 2>/dev/null
  if [ "${STEP:-0}" = 1 ]; then
    t=$(date +%s)
    timeout 240 python3 -m benchmarks.cfd_step --size 3328x1024 --no-scan --repeats 20 --fused "${FUSED:-40}" \
      --out "$OUT" 2>&1 | tail -25
    echo "benchmark rc=${PIPESTATUS[0]} in $(( $(date +%s) - t )) s"
  fi
} > "$LOG" 2>&1
if [ "${MINUTES:-3}" != 0 ]; then
  SPEC=cluster_configs/sweeps/cfd_inlet_fused.yaml MINUTES=${MINUTES:-3} SWEEP_LIMIT_S=${SWEEP_LIMIT_S:-330} \
    bash lab/cfd_sweep_on_gpu.sh > "$OUT/sweep.log" 2>&1
  echo "sweep rc=$?" >> "$LOG"
  tail -12 "$OUT/sweep.log" >> "$LOG"; rm -f "$OUT/sweep.log"
fi
cat "$LOG"
