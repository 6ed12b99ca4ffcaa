#!/usr/bin/env bash
# The scale rehearsal on a 16-core host (issue 18), as run on the lent device machine (its GPU unused):
#   1. a quiet 2-core machine emulated: the whole sweep (client, scheduler, every worker) pinned to cores 0
#      and 1 with taskset: 10^5 replayed samples over 32 workers, 1% failed rows, one worker killed;
#   2. 10^6 samples over 128 workers on every core, the recorded times x 1 (mean 5.5 ms a sample).
# Rows go to $OUT/pinned/results.jsonl and $OUT/wide/results.jsonl, the host's facts to $OUT/host.txt.
# Usage (from the repository root, with dask and distributed importable): OUT=/tmp/x lab/scale_rehearsal_host.sh
set -u
OUT=${OUT:-/tmp/scale_rehearsal_host}
export PYTHONUNBUFFERED=1
# CPU workers only: the local cluster would otherwise make one worker per visible GPU
export CUDA_VISIBLE_DEVICES=
mkdir -p "$OUT/pinned" "$OUT/wide"
{
  date -u
  nproc
  lscpu | grep -E "Model name|^CPU\(s\)|Thread\(s\)|Socket\(s\)|MHz"
  free -g | head -2
  python3 --version
  python3 -c "import dask, distributed, numpy, pyarrow, pandas; print('dask', dask.__version__, 'distributed', \
distributed.__version__, 'numpy', numpy.__version__, 'pyarrow', pyarrow.__version__, 'pandas', pandas.__version__)"
  echo "commit ${REHEARSAL_COMMIT:-?}"
} >"$OUT/host.txt" 2>&1
cat "$OUT/host.txt"
t0=$(date +%s)
taskset -c 0,1 timeout 200 python3 -m benchmarks.scale_rehearsal --samples 100000 --workers 32 \
  --batch-size auto --no-train --work /tmp/rehearsal_pinned --out "$OUT/pinned" >"$OUT/pinned/log.txt" 2>&1
echo "pinned: exit $? after $(($(date +%s) - t0)) s"
tail -1 "$OUT/pinned/log.txt"
t1=$(date +%s)
timeout 230 python3 -m benchmarks.scale_rehearsal --samples 1000000 --workers 128 --time-scale 1 \
  --batch-size auto --no-train --work /tmp/rehearsal_wide --out "$OUT/wide" >"$OUT/wide/log.txt" 2>&1
echo "wide: exit $? after $(($(date +%s) - t1)) s"
tail -1 "$OUT/wide/log.txt"
cp /tmp/rehearsal_wide/*.log "$OUT/wide/" 2>/dev/null || true
cp /tmp/rehearsal_pinned/*.log "$OUT/pinned/" 2>/dev/null || true
