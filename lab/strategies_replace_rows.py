"""Replace one strategy's rows in a committed ``--compare`` folder with a fresh run of that strategy alone,
then rewrite the folder's table, markdown and figure as ``--compare`` would (issue 17: the Kernel Tuner
baselines need the optional extra and an hour; a change to one of ours should re-run only ours).

    launchtune strategies --dataset $HUB --compare \\
        --budgets 20,50,100,200 --seeds 10 --strategies evolve --workers 2 --out /tmp/evolve
    python -m lab.strategies_replace_rows /tmp/evolve/runs.csv data/convolution/hub/strategies_kt

HUB: the Benchmark Hub's full convolution caches (cachefiles/convolution_milo of a clone of the hub; see
data/benchmark_hub/README.md). The new runs must be exactly the committed runs of their strategies (same
budgets, seeds, GPUs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from launchtune.pipeline.strategies.evaluate import replace_runs, write_outputs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("new_runs", type=Path, help="runs.csv of a --compare of the strategies to replace")
    p.add_argument("folder", type=Path, help="the committed --compare folder (runs.csv.gz, table.*, figure)")
    p.add_argument("--title", default="convolution", help="the figure title's dataset (default: %(default)s)")
    args = p.parse_args(argv)
    committed_path = args.folder / "runs.csv.gz"
    for path in (args.new_runs, committed_path):
        if not path.is_file():
            print(f"{path}: no such file", file=sys.stderr)
            return 2
    # pandas reads and writes the floats digit for digit (checked on the committed file)
    committed = pd.read_csv(committed_path)
    new = pd.read_csv(args.new_runs)
    try:
        runs = replace_runs(committed, new)
    except ValueError as e:
        print(f"{args.new_runs}: {e}", file=sys.stderr)
        return 2
    write_outputs(runs, args.folder, args.title, runs_name="runs.csv.gz")
    print(f"{args.folder}: replaced {len(new)} runs of {', '.join(sorted(set(new['strategy'])))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
