"""Scoring strategies on recorded data: one run -> one record; many runs -> the table of mean(picked/optimum).

What counts is the *true* value of the pick (the mean of its recorded repeats, see ``strategies.replay``)
over the best true value: the pick itself was chosen on noisy replayed measurements whose expectation is that
true value. ``best_measured_ratio`` is the true value of the best configuration the strategy measured (what it
would deploy if its measurements had no noise; Kernel Tuner's simulation mode reports this one) over the same
optimum: ``ratio >= best_measured_ratio``, and the gap is what noise cost the pick.

With live noise (``noise``, :class:`~launchtune.pipeline.strategies.replay.NoiseModel`) the true values are
this seed's live ones (``ReplayWorkload.live_time``: each configuration's recorded value times its persistent
offset), as a live re-measure sees them: ``ratio`` is the pick's over the optimum's (the best recorded
configuration, as a live check re-measures the sweep's best row), and may be under 1; ``recorded_ratio`` is
the same pick scored on the recorded values."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..learn.models import one_thread
from ..store.datasets import Dataset
from . import DEFAULT, NEEDS_PRIOR, get_strategy
from .base import Session, StrategyError
from .replay import NoiseModel, ReplayWorkload

# Separate noise streams: the strategy's own choices and the replayed measurement noise never share draws.
_NOISE_OFFSET = 1_000_003


def run_one(
    dataset: Dataset,
    strategy: str,
    budget: int,
    seed: int,
    prior: Sequence[Dataset] = (),
    repeats: int = 7,
    parallel: int = 1,
    noise: NoiseModel | None = None,
) -> dict[str, Any]:
    """Run ``strategy`` once on a replay of ``dataset``; the record the CLI prints as one JSON line.
    ``parallel``: measurements in flight at once, as a live search over that many workers
    (:mod:`launchtune.pipeline.strategies.parallel`; 1: the sequential run). ``noise``: live noise on top
    of the recorded repeats (the module's docstring)."""
    from .parallel import SimulatedAnswers

    workload = ReplayWorkload(dataset, seed=seed + _NOISE_OFFSET, noise=noise)
    session = Session(
        workload,
        budget,
        seed,
        repeats=repeats,
        prior=prior,
        kernels=dataset.kernels,
        device={"dataset": dataset},
        answers=SimulatedAnswers(workload, repeats, parallel) if parallel > 1 else None,
    )
    with one_thread():  # the estimators' numbers must not depend on the machine's thread count
        get_strategy(strategy)(session)
        session.settle()
    pick = session.best()
    time, source = workload.recorded_time(pick.config)
    best_config, optimum = workload.optimum()
    _, optimum_source = workload.recorded_time(best_config)
    seen = min((workload.recorded_time(m.config)[0], i) for i, m in enumerate(session.history))
    live = {}
    if noise is not None:
        live_optimum = workload.live_time(best_config)
        live_seen = min(workload.live_time(m.config) for m in session.history)
        live = {
            "ratio": workload.live_time(pick.config) / live_optimum,
            "recorded_ratio": time / optimum,
            "best_measured_ratio": live_seen / live_optimum,
            "noise": noise.as_dict(),
        }
    return {
        "strategy": strategy,
        "budget": budget,
        "seed": seed,
        "config": pick.config,
        "time": time,
        "optimum": optimum,
        "ratio": time / optimum,
        # time and optimum are the objective's costs (lower is better); value: the pick's own value
        "objective": dataset.objective.as_dict(),
        "value": dataset.objective.value(time),
        "measured": session.used,
        "best_measured_ratio": seen[0] / optimum,
        "best_measured_config": session.history[seen[1]].config,
        "gpu": dataset.name,
        "time_source": source,
        **session.notes,  # what the strategy says of its search (evolve: p_faster, faster_count)
        "optimum_source": optimum_source,
        **({"parallel": parallel} if parallel > 1 else {}),
        **({"resolved": DEFAULT} if strategy == "default" else {}),
        # a budget over the space: the whole space was measured, and the record says how large it is
        **({"space": session.space_size} if session.capped else {}),
        **live,
    }


def _task(args: tuple) -> dict[str, Any] | None:
    dataset, strategy, budget, seed, prior = args
    try:
        return run_one(dataset, strategy, budget, seed, prior)
    except StrategyError:
        return (
            None  # e.g. exhaustive search under a budget smaller than the space: a blank cell, not a failure
        )


def compare(
    datasets: Sequence[Dataset],
    strategies: Iterable[str],
    budgets: Iterable[int],
    seeds: int,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    targets: Sequence[Dataset] | None = None,
) -> pd.DataFrame:
    """Every (target, strategy, budget, seed) run; transfer strategies get the other datasets as prior."""
    tasks = []
    for d in targets if targets is not None else datasets:
        others = [o for o in datasets if o is not d]
        for s in strategies:
            if s in NEEDS_PRIOR and not others:
                continue
            for b in budgets:
                for seed in range(seeds):
                    tasks.append((d, s, int(b), seed, others if s in NEEDS_PRIOR else []))
    workers = workers or max(1, min(len(tasks), os.cpu_count() or 1))
    records = []
    if workers == 1:
        for n, t in enumerate(tasks, 1):
            records.append(_task(t))
            if progress:
                progress(n, len(tasks))
    else:
        with ProcessPoolExecutor(workers) as pool:
            for n, rec in enumerate(pool.map(_task, tasks, chunksize=1), 1):
                records.append(rec)
                if progress:
                    progress(n, len(tasks))
    return pd.DataFrame([r for r in records if r is not None])


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """mean(picked/optimum) per strategy x budget x GPU, the mean over GPUs, the worst GPU's mean, the worst
    single run (``worst seed``: the highest ratio of any seed on any GPU, what one unlucky user meets), and
    the seeds behind it."""
    g = runs.groupby(["strategy", "budget", "gpu"])["ratio"]
    table = g.mean().unstack("gpu")
    gpus = list(table.columns)
    table["mean"] = table.mean(axis=1)
    table["worst GPU"] = table[gpus].max(axis=1)
    table["worst seed"] = runs.groupby(["strategy", "budget"])["ratio"].max()
    if "best_measured_ratio" in runs:
        table["best_measured"] = runs.groupby(["strategy", "budget"])["best_measured_ratio"].mean()
    table["seeds"] = g.size().groupby(["strategy", "budget"]).min()
    return table.reset_index()


def tool(strategy: str) -> str:
    return "Kernel Tuner" if strategy.startswith("kt:") else "launchtune"


def head_to_head(table: pd.DataFrame) -> pd.DataFrame:
    """Per budget and tool (ours, Kernel Tuner's), the strategy with the lowest mean over GPUs, its mean, its
    worst GPU's mean, and the lowest worst-GPU mean of any of that tool's strategies; transfer strategies
    (trained on other GPUs) are left out: Kernel Tuner has none."""
    rows = []
    solo = table[~table["strategy"].isin(NEEDS_PRIOR)]
    for (budget, who), g in solo.groupby([solo["budget"], solo["strategy"].map(tool)], sort=True):
        best = g.loc[g["mean"].idxmin()]
        rows.append(
            {
                "budget": budget,
                "tool": who,
                "best strategy": best["strategy"],
                "mean": best["mean"],
                "its worst GPU": best["worst GPU"],
                "its worst seed": best["worst seed"],
                "lowest worst GPU (any strategy)": g["worst GPU"].min(),
            }
        )
    return pd.DataFrame(rows)


def plot(table: pd.DataFrame, path: str, title: str = "") -> None:
    """mean(picked/optimum) over GPUs against budget, one line per strategy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for name, g in table.groupby("strategy"):
        g = g.sort_values("budget")
        label = f"{name} (trained on the other GPUs)" if name in NEEDS_PRIOR else name
        ax.plot(g["budget"], g["mean"], marker="o", label=label)
    ax.axhline(1.05, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xscale("log")
    budgets = sorted(table["budget"].unique())
    ax.set_xticks(budgets, [str(b) for b in budgets])
    ax.minorticks_off()
    ax.set_xlabel("budget (measurements)")
    ax.set_ylabel("mean picked / optimum (recorded)")
    ax.set_title(title or "strategies on recorded data")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_outputs(
    runs: pd.DataFrame, out: Path, title: str, runs_name: str = "runs.csv"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What ``--compare`` writes into ``out``: the runs (``runs_name``; gzipped if it ends in ``.gz``),
    ``table.csv``, ``table.md`` (the table, then the head-to-head) and ``ratio_vs_budget.png``. Returns the
    table and the head-to-head."""
    table = summarize(runs)
    out.mkdir(parents=True, exist_ok=True)
    gz = {"method": "gzip", "compresslevel": 9, "mtime": 0} if runs_name.endswith(".gz") else None
    runs.to_csv(out / runs_name, index=False, compression=gz)
    table.to_csv(out / "table.csv", index=False, float_format="%.4f")
    both = head_to_head(table)
    (out / "table.md").write_text(markdown(table) + "\n" + markdown(both))
    plot(table, str(out / "ratio_vs_budget.png"), title=f"{title}: mean over GPUs")
    return table, both


RUN_KEY = ["strategy", "budget", "seed", "gpu"]


def replace_runs(committed: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """``committed`` with its rows of ``new``'s strategies replaced by ``new``'s, in place (the order of the
    committed file kept). Refused unless ``new`` holds exactly the same (strategy, budget, seed, gpu) runs of
    those strategies as ``committed``: a partial re-run would mix two versions of one strategy."""
    mine = committed["strategy"].isin(set(new["strategy"]))
    old_keys = set(map(tuple, committed.loc[mine, RUN_KEY].to_numpy().tolist()))
    new_keys = list(map(tuple, new[RUN_KEY].to_numpy().tolist()))
    if len(set(new_keys)) != len(new_keys) or set(new_keys) != old_keys:
        raise ValueError(
            f"the new runs ({len(new_keys)}) are not the committed runs of {sorted(set(new['strategy']))} "
            f"({len(old_keys)}): same strategies, budgets, seeds and GPUs needed"
        )
    by_key = new.set_index(RUN_KEY)
    out = committed.copy()
    rows = out.loc[mine, RUN_KEY].apply(tuple, axis=1)
    for col in committed.columns:
        if col not in RUN_KEY:
            out.loc[mine, col] = by_key.loc[list(rows), col].to_numpy()
    return out


def markdown(table: pd.DataFrame) -> str:
    cols = list(table.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for _, row in table.iterrows():
        cells = [
            f"{v:.3f}"
            if isinstance(v, float) and not np.isnan(v)
            else ("" if isinstance(v, float) else str(v))
            for v in row
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
