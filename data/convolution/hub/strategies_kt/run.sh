#!/usr/bin/env bash
# Issue 17: ours and Kernel Tuner 1.5's strategies side by side on the Benchmark Hub convolution caches (six GPUs),
# one --compare run, replayed on the CPU; writes runs.csv (gzipped afterwards), table.csv, table.md, the figure.
# Needs the extra 'kt' (pip install -e .[kt]). Run from the repository root.
set -euo pipefail
# HUB: a folder holding the full caches as convolution/<GPU>.json.gz (the hub's cachefiles/convolution_milo;
# data/benchmark_hub/README.md). HUB=data/benchmark_hub runs it on the committed subset (other numbers).
HUB=${HUB:?set HUB to a folder holding the Benchmark Hub caches as convolution/*.json.gz}
OUT=data/convolution/hub/strategies_kt
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
launchtune strategies --dataset "$HUB/convolution" --compare --budgets 20,50,100,200 --seeds 10 \
    --strategies random,bayes,evolve,transfer,kt:genetic_algorithm,kt:pso,kt:firefly_algorithm,kt:simulated_annealing \
    --workers "${WORKERS:-2}" --out "$OUT"
gzip -9f "$OUT/runs.csv"
