"""What batching costs a search's quality, replayed on recorded spaces (no GPU).

A live search over K workers (``launchtune sweep --strategy``) keeps K measurements in flight: its
strategy proposes before the last K-1 answers are back, and answers come out of order. This replays that on
recorded data (``pipeline.strategies.parallel``: each answer arrives after its recorded time) and scores
mean picked/optimum per strategy and K against K = 1 (the sequential run), with the ratio's 95% stratified
bootstrap interval (``strategies.uncertainty.ratio_interval``: seeds resampled within each GPU).

    python -m benchmarks.search_batching --dataset data/benchmark_hub/convolution \\
        --strategies evolve,iterative --budget 100 --parallel 1,4,8 --seeds 20 --out DIR

(the committed subset of the Benchmark Hub's caches; the table in data/convolution/hub/search_batching came
from the full caches, data/benchmark_hub/README.md) writes ``DIR/runs.jsonl`` (one line per run, the CLI's
record plus ``parallel``) and ``DIR/table.md``.
"""

from __future__ import annotations

import argparse
import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks import run_main


def _one(args: tuple) -> dict[str, Any]:
    from launchtune.pipeline.strategies.evaluate import run_one

    dataset, strategy, budget, seed, parallel, prior = args
    record = run_one(dataset, strategy, budget, seed, prior, parallel=parallel)
    record["parallel"] = parallel
    record.pop("config", None), record.pop("best_measured_config", None)
    return record


def table(runs: pd.DataFrame) -> str:
    """Mean picked/optimum per strategy, budget and K (mean over GPUs of per-GPU means), and K against 1."""
    from launchtune.pipeline.strategies.uncertainty import ratio_interval

    runs = runs.assign(label=runs["strategy"] + "@" + runs["parallel"].astype(str))
    gpus = sorted(runs["gpu"].unique())
    lines = [
        "| strategy | budget | in flight | " + " | ".join(gpus) + " | mean | against 1 in flight [95%] |",
        "| --- | ---: | ---: | " + " | ".join("---:" for _ in gpus) + " | ---: | --- |",
    ]
    for (strategy, budget, parallel), g in runs.groupby(["strategy", "budget", "parallel"], sort=True):
        per = g.groupby("gpu")["ratio"].mean()
        cell = ""
        if parallel != 1:
            r = ratio_interval(
                runs.assign(strategy=runs["label"]), f"{strategy}@{parallel}", f"{strategy}@1", int(budget)
            )
            words = (
                str(r["verdict"]).replace("ours", f"{parallel} in flight").replace("theirs", "1 in flight")
            )
            cell = f"{r['ratio']:.3f} [{r['low']:.3f}, {r['high']:.3f}] {words}"
        lines.append(
            f"| {strategy} | {budget} | {parallel} | "
            + " | ".join(f"{per.get(gpu, float('nan')):.3f}" for gpu in gpus)
            + f" | {per.mean():.3f} | {cell} |"
        )
    seeds = runs.groupby(["strategy", "budget", "parallel", "gpu"]).size()
    lines += ["", f"Seeds per cell: {seeds.min()}-{seeds.max()}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", action="append", required=True)
    p.add_argument("--strategies", default="evolve,iterative")
    p.add_argument("--budget", type=int, action="append")
    p.add_argument("--parallel", default="1,4,8")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--gpu", default=None, help="only this dataset (name)")
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 1)))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--table-only", action="store_true", help="reprint table.md from DIR/runs.jsonl")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    runs_path = args.out / "runs.jsonl"
    if not args.table_only:
        from launchtune.pipeline.store.datasets import load_datasets
        from launchtune.pipeline.strategies import NEEDS_PRIOR

        datasets = [d for path in args.dataset for d in load_datasets(path)]
        targets = [d for d in datasets if args.gpu in (None, d.name)]
        done = set()
        if runs_path.is_file():  # a rerun goes on where the last stopped
            for line in runs_path.read_text().splitlines():
                r = json.loads(line)
                done.add((r["gpu"], r["strategy"], r["budget"], r["seed"], r["parallel"]))
        # seed by seed: whatever has finished covers every cell with the same seeds
        tasks = []
        for seed in range(args.seeds):
            for d in targets:
                for strategy in args.strategies.split(","):
                    prior = [o for o in datasets if o is not d] if strategy in NEEDS_PRIOR else []
                    for budget in args.budget or [100]:
                        for parallel in (int(k) for k in args.parallel.split(",")):
                            if (d.name, strategy, budget, seed, parallel) not in done:
                                tasks.append((d, strategy, budget, seed, parallel, prior))
        with ProcessPoolExecutor(args.workers) as pool, open(runs_path, "a") as f:
            for record in pool.map(_one, tasks, chunksize=1):
                f.write(json.dumps(record) + "\n")
                f.flush()
    runs = pd.DataFrame([json.loads(line) for line in runs_path.read_text().splitlines()])
    cells = runs.groupby(["gpu", "strategy", "budget", "parallel"]).ngroups
    complete = runs.groupby("seed").filter(lambda g: len(g) == cells)  # seeds every cell has
    text = table(complete)
    (args.out / "table.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    run_main(main)
