"""The head-to-head's interval (pipeline/strategies/uncertainty.py): stratified by GPU, seeded, honest."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.strategies.uncertainty import head_to_head_intervals, ratio_interval


def _runs(shift: float, spread: float = 0.02, seeds: int = 10) -> pd.DataFrame:
    """Two strategies on three GPUs whose means differ by 2x; 'evolve' is ``shift`` better than 'kt:pso'."""
    rng = np.random.default_rng(7)
    rows = []
    for gpu, base in (("A", 1.1), ("B", 1.5), ("C", 2.2)):
        for strategy, offset in (("evolve", -shift), ("kt:pso", 0.0)):
            for seed in range(seeds):
                ratio = base + offset + spread * rng.standard_normal()
                rows.append({"strategy": strategy, "budget": 50, "gpu": gpu, "seed": seed, "ratio": ratio})
    return pd.DataFrame(rows)


def test_a_clear_lead_is_a_verdict_and_the_point_is_the_ratio_of_the_table_means():
    runs = _runs(shift=0.2)
    r = ratio_interval(runs, "evolve", "kt:pso", 50)
    means = runs.groupby(["strategy", "gpu"])["ratio"].mean().groupby("strategy").mean()
    assert r["ratio"] == pytest.approx(means["evolve"] / means["kt:pso"], rel=1e-12)
    assert r["low"] < r["ratio"] < r["high"] < 1 and r["verdict"] == "ours closer to the optimum"
    # stratified by GPU: the 2x spread between GPUs does not widen the interval past the seeds' noise
    assert r["high"] - r["low"] < 0.05


def test_a_difference_inside_the_seed_noise_is_no_measurable_difference_and_the_seed_fixes_it():
    runs = _runs(shift=0.0, spread=0.1)
    r = ratio_interval(runs, "evolve", "kt:pso", 50, seed=3)
    assert r["low"] < 1 < r["high"] and r["verdict"] == "no measurable difference"
    assert ratio_interval(runs, "evolve", "kt:pso", 50, seed=3) == r
    table = head_to_head_intervals(_runs(shift=0.2))
    assert table[["budget", "ours", "Kernel Tuner"]].values.tolist() == [[50, "evolve", "kt:pso"]]
