#!/usr/bin/env bash
# Where each launchtune.tune_kernel call's time goes on one lent GPU (issue 52): Kernel Tuner's reduction
# example's twelve calls (800 million floats, 20 random configurations each) in one process, through
# benchmarks/tune_kernel_overhead.py: one line per call with its wall time and the seconds in each stage.
# $OUT gets: nvidia-smi.txt, device.json (gpu_setup.sh), run.log, stages.json and a cProfile per call.
# Dry run: DRY_RUN=1 (no GPU: the calls replay the reduction caches a GPU run recorded, stages timed)
# Usage (repository root): bash benchmarks/tune_kernel_overhead_gpu.sh [OUT]   (default $OUT, else /tmp/out)
set -uo pipefail
OUT=${1:-${OUT:-/tmp/out}}; mkdir -p "$OUT"
source benchmarks/gpu_setup.sh  # wheels, PYTHONPATH, nvidia-smi.txt, device.json
WORK=$(mktemp -d)  # the calls' sweep folders, kept out of $OUT
date -u +"start %Y-%m-%dT%H:%M:%SZ commit $(git rev-parse --short HEAD 2>/dev/null)" | tee "$OUT/run.log"
python3 -m benchmarks.tune_kernel_overhead "$WORK" --cprofile $DRY 2>&1 | tee -a "$OUT/run.log"
status=${PIPESTATUS[0]}
cp "$WORK"/stages.json "$WORK"/*.prof "$OUT/" 2>/dev/null
date -u +"end %Y-%m-%dT%H:%M:%SZ rc=$status" | tee -a "$OUT/run.log"
exit "$status"
