"""The head-to-head's interval (pipeline/strategies/uncertainty.py): stratified by GPU, seeded, honest."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from launchtune.pipeline.strategies.uncertainty import head_to_head_intervals, ratio_interval


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


def _hand_written_interval(runs: pd.DataFrame, ours: str, theirs: str, seed: int, n_boot: int = 4000):
    """The scheme the module used before scipy did it: each (strategy, GPU) pair's seeds resampled on their
    own, the ratio of the means over GPUs of the per-GPU means, its 2.5% and 97.5% quantiles."""
    rng = np.random.default_rng(seed)

    def resampled(strategy: str) -> np.ndarray:
        per_gpu = []
        for _, g in runs[runs["strategy"] == strategy].groupby("gpu", sort=True):
            values = g["ratio"].to_numpy(float)
            per_gpu.append(values[rng.integers(0, len(values), size=(n_boot, len(values)))].mean(axis=1))
        return np.mean(per_gpu, axis=0)

    boot = resampled(ours) / resampled(theirs)
    return np.quantile(boot, [0.025, 0.975])


@pytest.mark.parametrize("shift, spread", [(0.2, 0.02), (0.0, 0.1)])
def test_scipys_bootstrap_gives_the_hand_written_schemes_interval(shift, spread):
    runs = _runs(shift=shift, spread=spread)
    r = ratio_interval(runs, "evolve", "kt:pso", 50, seed=0)
    # another seed's draw of the same scheme: the same interval up to the bootstrap's own noise (about 0.001
    # here with 4,000 resamples), far inside the interval's width
    low, high = _hand_written_interval(runs, "evolve", "kt:pso", seed=11)
    width = r["high"] - r["low"]
    assert r["low"] == pytest.approx(low, abs=0.05 * width)
    assert r["high"] == pytest.approx(high, abs=0.05 * width)


def test_a_gpu_with_one_seed_enters_as_a_constant_and_one_seed_everywhere_is_the_point():
    runs = _runs(shift=0.2)
    one = runs[~((runs["gpu"] == "C") & (runs["seed"] > 0))]
    r = ratio_interval(one, "evolve", "kt:pso", 50)
    low, high = _hand_written_interval(one, "evolve", "kt:pso", seed=11)
    assert r["low"] == pytest.approx(low, abs=0.05 * (high - low))
    assert r["high"] == pytest.approx(high, abs=0.05 * (high - low))
    single = runs[runs["seed"] == 0]
    s = ratio_interval(single, "evolve", "kt:pso", 50)
    assert s["low"] == s["ratio"] == s["high"] and s["verdict"] == "ours closer to the optimum"
