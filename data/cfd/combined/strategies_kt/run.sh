#!/usr/bin/env bash
# Issue 17: ours and Kernel Tuner 1.5's strategies side by side on our own CFD sweeps (H100, H200), one --compare
# run, replayed on the CPU; writes runs.csv (gzipped afterwards), table.csv, table.md, the figure.
#   SPACE=fused (default): data/cfd/<class>/sweep_fused  -> data/cfd/combined/strategies_kt
#   SPACE=paper:           data/cfd/<class>/sweep_paper  -> data/cfd/combined/strategies_kt_paper
# Needs the extra 'kt' (pip install -e .[kt]). Run from the repository root.
set -euo pipefail
SPACE=${SPACE:-fused}
case "$SPACE" in
    fused) OUT=data/cfd/combined/strategies_kt ;;
    paper) OUT=data/cfd/combined/strategies_kt_paper ;;
    *) echo "error: SPACE must be fused or paper, got '$SPACE'" >&2; exit 2 ;;
esac
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
python -m pipeline strategies \
    --dataset "data/cfd/h100/sweep_$SPACE/merged" --dataset "data/cfd/h200/sweep_$SPACE/merged" \
    --compare --budgets 20,50,100,200 --seeds 5 \
    --strategies evolve,iterative,random,kt:simulated_annealing,kt:pso,kt:firefly_algorithm,kt:random_sample \
    --workers "${WORKERS:-2}" --out "$OUT"
gzip -9f "$OUT/runs.csv"
