"""How sure a strategy comparison is: our best strategy against Kernel Tuner's, with a 95% interval.

A table cell is the mean over GPUs of each GPU's mean picked/optimum over seeds. Two strategies' cells differ
by seed luck as well as by skill, so the head-to-head ratio (ours / Kernel Tuner's) gets a bootstrap interval
(``scipy.stats.bootstrap``, percentile method) and a verdict the interval decides, as ``kernels.compare`` does
for timings. Each (strategy, GPU) pair's seeds are one sample, and the bootstrap resamples every sample on its
own: seeds stay within their GPU (resampling across GPUs would mix GPUs whose means differ by 2x and widen the
interval for no reason), and the two strategies are not paired (the same seed number drives different
searches).
"""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
from scipy.stats import bootstrap

from launchtune.kernels.compare import FASTER, SLOWER, verdict

from .evaluate import head_to_head, summarize


def _gpu_samples(runs: pd.DataFrame) -> tuple[list[np.ndarray], float]:
    """Each GPU's ratios over seeds, and the summed means of the GPUs with one seed: a sample of one has
    nothing to resample (scipy refuses it), so it enters the statistic as the constant it always is."""
    samples, constant = [], 0.0
    for _, g in runs.groupby("gpu", sort=True):
        values = g["ratio"].to_numpy(float)
        if len(values) > 1:
            samples.append(values)
        else:
            constant += float(values[0])
    return samples, constant


def ratio_interval(
    runs: pd.DataFrame, ours: str, theirs: str, budget: int, seed: int = 0, n_boot: int = 4000
) -> dict[str, float | str]:
    """mean(ours) / mean(theirs) at ``budget`` with its 95% stratified bootstrap interval and what the
    interval decides: "ours closer to the optimum", "theirs closer to the optimum" or "no measurable
    difference"."""
    a = runs[(runs["strategy"] == ours) & (runs["budget"] == budget)]
    b = runs[(runs["strategy"] == theirs) & (runs["budget"] == budget)]
    point = a.groupby("gpu")["ratio"].mean().mean() / b.groupby("gpu")["ratio"].mean().mean()
    (sa, ca), (sb, cb) = _gpu_samples(a), _gpu_samples(b)
    na, nb = a["gpu"].nunique(), b["gpu"].nunique()

    def ratio_of_means(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        means = [s.mean(axis=axis) for s in samples]
        return (sum(means[: len(sa)], ca) / na) / (sum(means[len(sa) :], cb) / nb)

    if not sa and not sb:  # one seed per GPU: nothing to resample
        low = high = float(point)
    else:
        # scipy >= 1.15 names the generator ``rng``; older ones (a cluster's module stack) ``random_state``
        gen_key = "rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state"
        res = bootstrap(
            (*sa, *sb),
            ratio_of_means,
            n_resamples=n_boot,
            confidence_level=0.95,
            method="percentile",
            vectorized=True,
            **{gen_key: np.random.default_rng(seed)},
        )
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
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
