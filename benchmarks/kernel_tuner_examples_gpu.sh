#!/usr/bin/env bash
# Kernel Tuner's CUDA examples on one lent GPU (issue 52; one device call): each script of
# tests/kernel_tuner_examples/ with Kernel Tuner 1.5 and with launchtune (the import the only change), through
# benchmarks/kernel_tuner_examples.py: wall time, each call's pick and its time, rows and rows ok per tool.
# $OUT gets: nvidia-smi.txt, device.json (gpu_setup.sh), run.log, examples.json, and caches.tar.gz (a Kernel
# Tuner cache per launchtune call, which the CPU test replays: untar into data/kernel_tuner_examples/).
# Dry run: none (a GPU's work; tests/benchmarks/test_kernel_tuner_examples.py runs the examples on the CPU)
# Usage (repository root): bash benchmarks/kernel_tuner_examples_gpu.sh [OUT] [NAME ...] [--timeout S]
#   (default $OUT, else /tmp/out). LIMIT_S (560): the examples' whole run, so the results and caches are still
#   copied to $OUT inside one 10-minute device call (examples.json is written after each example).
set -uo pipefail
OUT=${1:-${OUT:-/tmp/out}}; shift || true; mkdir -p "$OUT"
source benchmarks/gpu_setup.sh  # wheels (kernel_tuner among them), PYTHONPATH, nvidia-smi.txt, device.json
WORK=$(mktemp -d)  # the scripts' folders and sweeps: large, kept out of $OUT
date -u +"start %Y-%m-%dT%H:%M:%SZ commit $(git rev-parse --short HEAD 2>/dev/null)" | tee "$OUT/run.log"
timeout "${LIMIT_S:-560}" python3 -m benchmarks.kernel_tuner_examples "$WORK" "$@" 2>&1 | tee -a "$OUT/run.log"
status=${PIPESTATUS[0]}
cp "$WORK/examples.json" "$OUT/examples.json" 2>/dev/null
tar -czf "$OUT/caches.tar.gz" -C "$WORK" caches
date -u +"end %Y-%m-%dT%H:%M:%SZ rc=$status" | tee -a "$OUT/run.log"
exit "$status"
