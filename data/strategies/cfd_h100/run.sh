#!/usr/bin/env bash
# Replays issue 3's H100 CFD sweep (data/cfd_inlet_h100/merged) under several strategies and budgets;
# one JSON line per run on stdout (runs.jsonl beside this file). CPU only, about 3 minutes on 2 cores.
cd "$(dirname "$0")/../../.." || exit 1
D=data/cfd_inlet_h100/merged
for spec in "random_mlp 7500" "random_mlp 500" "random_mlp 200" "iterative 200" "iterative 500" \
            "random_additive 200" "random_additive 500" "random 200" "random 500"; do
  set -- $spec
  python -m pipeline strategies --dataset $D --strategy "$1" --budget "$2" --seeds 5
done
