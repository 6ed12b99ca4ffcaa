"""Summarise CFD replay records (the JSON lines of ``launchtune strategies``) as a markdown table.

    python -m lab.strategies_cfd_summary data/cfd/h*/strategies/runs.jsonl

One row per GPU, strategy and budget: mean, best and worst picked/optimum over the seeds, and how many picks
are configurations nobody recorded (``time_source`` "additive": their time is the replay's per-kernel sum,
not a measurement). Every ratio divides by the best recorded row of the GPU's whole sweep: lines of
``<gpu>_random_rows`` (the seed's setting, run.sh's last part: candidates are the random rows only) carry the
best random row as their ``optimum`` and are divided again here.

The last column smooths the noise out of one row's time: the pick's per-kernel estimate (each kernel's
median recorded time under the pick's own setting, over the rows that share it, plus the median overhead)
over the same estimate of the default launch (one thread per cell, 256 threads). It reads the sweep of each
GPU from ``data/cfd/<gpu>/sweep_paper/merged``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from launchtune.pipeline.store.datasets import load_datasets
from launchtune.pipeline.strategies.replay import ReplayWorkload

REPO = Path(__file__).resolve().parents[1]


def table(paths: list[str]) -> str:
    runs = pd.DataFrame([json.loads(line) for p in paths for line in open(p) if line.strip()])
    order = {"per_kernel_exhaustive": 0, "random_mlp": 1, "random": 2, "random_additive": 3, "iterative": 4}
    runs["_o"] = runs["strategy"].map(order).fillna(9)
    runs["base"] = runs["gpu"].str.removesuffix("_random_rows")
    runs["candidates"] = ["random rows" if g.endswith("_random_rows") else "all rows" for g in runs["gpu"]]
    replays = {}
    for gpu in runs["base"].unique():
        (d,) = load_datasets(REPO / f"data/cfd/{gpu}/sweep_paper/merged")
        w = ReplayWorkload(d)
        replays[gpu] = (w, w._estimate(w._key(d.default))[0], d.optimum)

    def smoothed(r: pd.Series) -> float:
        w, default, _ = replays[r["base"]]
        return w._estimate(w._key(r["config"]))[0] / default

    runs["smoothed"] = runs.apply(smoothed, axis=1)
    runs["full"] = [t / replays[b][2] for t, b in zip(runs["time"], runs["base"], strict=True)]
    lines = [
        "| GPU | candidates | strategy | budget | mean picked/optimum | best | worst | seeds "
        "| picks not recorded | pick / default, per-kernel estimates (mean) |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    keys = ["base", "candidates", "_o", "budget", "strategy"]
    for (gpu, cand, _, budget, strategy), g in runs.groupby(keys, sort=True):
        unrecorded = int((g["time_source"] != "recorded").sum())
        lines.append(
            f"| {gpu} | {cand} | {strategy} | {budget} | {g['full'].mean():.4f} | {g['full'].min():.4f} | "
            f"{g['full'].max():.4f} | {len(g)} | {unrecorded} | {g['smoothed'].mean():.4f} |"
        )
    notes = []
    for gpu, (_, default, optimum) in replays.items():
        source = set(runs.loc[runs["gpu"] == gpu, "optimum_source"])
        notes.append(
            f"{gpu}: optimum {optimum:.4f} ms (best row, {'/'.join(sorted(source))}), "
            f"default's per-kernel estimate {default:.4f} ms"
        )
    return "\n".join(lines) + "\n\n" + "; ".join(notes) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="runs.jsonl files of launchtune strategies")
    print(table(ap.parse_args(argv).runs), end="")


if __name__ == "__main__":
    main()
