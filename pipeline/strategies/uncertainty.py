"""How sure a strategy comparison is: our best strategy against Kernel Tuner's, with a 95% interval.

A table cell is the mean over GPUs of each GPU's mean picked/optimum over seeds. Two strategies' cells differ
by seed luck as well as by skill, so the head-to-head ratio (ours / Kernel Tuner's) gets a bootstrap interval
that resamples the seeds within each GPU, for each strategy independently (their seeds are not paired: the
same seed number drives different searches), and a verdict the interval decides, as ``kernels.compare`` does
for timings.

Hand-written because ``scipy.stats.bootstrap`` resamples whole samples and has no strata: resampling runs
across GPUs would mix GPUs whose means differ by 2x and widen the interval for no reason.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kernels.compare import FASTER, SLOWER, verdict
from pipeline.strategies.evaluate import head_to_head, summarize


def _resampled_means(runs: pd.DataFrame, rng: np.random.Generator, n_boot: int) -> np.ndarray:
    """``n_boot`` bootstrap replicates of the mean over GPUs of the per-GPU mean ratio."""
    per_gpu = []
    for _, g in runs.groupby("gpu", sort=True):
        values = g["ratio"].to_numpy(float)
        picks = rng.integers(0, len(values), size=(n_boot, len(values)))
        per_gpu.append(values[picks].mean(axis=1))
    return np.mean(per_gpu, axis=0)


def ratio_interval(
    runs: pd.DataFrame, ours: str, theirs: str, budget: int, seed: int = 0, n_boot: int = 4000
) -> dict[str, float | str]:
    """mean(ours) / mean(theirs) at ``budget`` with its 95% stratified bootstrap interval and what the
    interval decides: "ours closer to the optimum", "theirs closer to the optimum" or "no measurable
    difference"."""
    rng = np.random.default_rng(seed)
    a = runs[(runs["strategy"] == ours) & (runs["budget"] == budget)]
    b = runs[(runs["strategy"] == theirs) & (runs["budget"] == budget)]
    point = a.groupby("gpu")["ratio"].mean().mean() / b.groupby("gpu")["ratio"].mean().mean()
    boot = _resampled_means(a, rng, n_boot) / _resampled_means(b, rng, n_boot)
    low, high = np.quantile(boot, [0.025, 0.975])
    word = {FASTER: "ours closer to the optimum", SLOWER: "theirs closer to the optimum"}.get(
        verdict(low, high), "no measurable difference"
    )
    return {"ratio": float(point), "low": float(low), "high": float(high), "verdict": word}


def head_to_head_intervals(runs: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per budget: our best strategy without prior data against Kernel Tuner's best, ratio of means [95%]."""
    both = head_to_head(summarize(runs))
    rows = []
    for budget, g in both.groupby("budget", sort=True):
        best = dict(zip(g["tool"], g["best strategy"], strict=True))
        if {"launchtune", "Kernel Tuner"} - best.keys():
            continue
        ours, theirs = best["launchtune"], best["Kernel Tuner"]
        r = ratio_interval(runs, ours, theirs, int(budget), seed)
        rows.append({"budget": int(budget), "ours": ours, "Kernel Tuner": theirs, **r})
    return pd.DataFrame(rows)
