#!/usr/bin/env bash
# Every one-GPU benchmark run as committed, with short settings, one after the other on one lent GPU: each
# benchmarks/*_gpu.sh whose header has a `# Dry run: DRY_RUN=1` line (slurm_gpu.sh needs two cards and root),
# then a table of script -> exit code (0: it ran to its end; 124: its time limit). A check that the scripts
# still run, not a measurement: the settings below are too short for any figure. Exit 0 only where every
# script ran and exited 0 (2: a name that is no script).
# Usage (repository root, the wheels in .whl as for each script): bash benchmarks/all_gpu_smoke.sh [SCRIPT...]
#   (default: all of them, in name order). DEADLINE_S (560): the whole call's limit, so it fits one 10-minute
#   device command: a script starts only with MIN_S (100) left and runs under the smaller of PER_S (240) and
#   what is left (exit 124: cut there); the rest are listed as not run: give them to a second call.
# $OUT receives three files: smoke.log (every script's output, in order), smoke.tar.gz (each script's own
# $OUT, a folder per script) and table.txt (the table, also printed last).
# With DRY_RUN=1 each script runs its own dry run with the same settings (no GPU).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WORK=${TMPDIR:-/tmp}/all_gpu_smoke
rm -rf "$WORK"; mkdir -p "$WORK"

# Short settings per script (each name is a variable the script reads; tests/benchmarks/test_dry_run.py checks
# it); a script not listed here runs with its own defaults.
settings() {
  case $1 in
    kernel_convolution_gpu.sh) echo "MINUTES=0.5 SWEEP_LIMIT_S=150 AHEAD_SAMPLES=8,24 AHEAD_LIMIT_S=80" ;;
    live_search_cards_gpu.sh) echo "BUDGET=10 SEEDS=0 ROUNDS=3 LIMIT_S=100" ;;
    live_search_convolution_gpu.sh) echo "STRATEGIES=evolve,kt:random_sample BUDGETS=10 SEEDS=0 ROUNDS=3 LIMIT_S=150" ;;
    live_search_default_gpu.sh) echo "BUDGETS=10 SEEDS=0 ROUNDS=3 CFD_S=120 CONVOLUTION_S=60" ;;
    live_search_gpu.sh) echo "STRATEGIES=evolve BUDGETS=10 SEEDS=0 ROUNDS=3 TOP_ROWS=2 LIMIT_S=180" ;;
    objective_energy_gpu.sh) echo "SAMPLES=12 BUDGET=10 SEEDS=0" ;;
    objective_gpu.sh) echo "BUDGET=10 SEEDS=0 SEARCH_S=90 ROUNDS=3 ENERGY=0" ;;
    time_to_pick_gpu.sh) echo "CASES=heat@10 SEEDS=0 EXAMPLES=vector_add ROUNDS=3 DEADLINE=120 LIMIT_S=180" ;;
    *) echo "" ;;
  esac
}

if [ $# -gt 0 ]; then
  SCRIPTS=("$@")
else
  SCRIPTS=()
  for f in benchmarks/*_gpu.sh; do
    grep -q '^# Dry run: DRY_RUN=1' "$f" && SCRIPTS+=("$(basename "$f")")
  done
fi
LOG=$OUT/smoke.log
{ date -u +"start %Y-%m-%dT%H:%M:%SZ"; git rev-parse HEAD 2>/dev/null || true; } > "$LOG"
began=$SECONDS
ROWS=()
worst=0
for s in "${SCRIPTS[@]}"; do
  if [ ! -f "benchmarks/$s" ]; then
    ROWS+=("$s|no such script|"); worst=2; continue
  fi
  left=$(( ${DEADLINE_S:-560} - (SECONDS - began) ))
  if [ "$left" -lt "${MIN_S:-100}" ]; then
    ROWS+=("$s|not run (${left} s left)|"); [ "$worst" != 0 ] || worst=1; continue
  fi
  limit=$(( left < ${PER_S:-240} ? left : ${PER_S:-240} ))
  read -ra SET <<< "$(settings "$s")"
  echo "=== $s ${SET[*]} ($(date -u +%H:%M:%S))" | tee -a "$LOG"
  t0=$SECONDS
  env "${SET[@]}" OUT="$WORK/${s%.sh}" timeout "$limit" bash "benchmarks/$s" >> "$LOG" 2>&1
  rc=$?
  echo "=== $s rc=$rc in $((SECONDS - t0)) s" | tee -a "$LOG"
  ROWS+=("$s|$rc|$((SECONDS - t0))")
  [ "$rc" = 0 ] || [ "$worst" != 0 ] || worst=1
done
tar -C "$WORK" -czf "$OUT/smoke.tar.gz" . 2>/dev/null
{
  echo "| script | exit code | seconds |"
  echo "| --- | ---: | ---: |"
  for row in "${ROWS[@]}"; do IFS='|' read -r s rc secs <<< "$row"; echo "| $s | $rc | $secs |"; done
} > "$OUT/table.txt"
date -u +"end %Y-%m-%dT%H:%M:%SZ" >> "$LOG"
cat "$OUT/table.txt"
exit $worst
