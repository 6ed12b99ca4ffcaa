"""Live noise on a replay (issue 53): fitted from live records, drawn per seed and per visit, reproducible."""

from __future__ import annotations

import json

import numpy as np
import pytest

from launchtune.pipeline.store.datasets import load_datasets
from launchtune.pipeline.strategies.replay import NoiseModel, ReplayWorkload

CONFIG = {"block_size_x": 32, "block_size_y": 2, "tile": 1}
NOISE = NoiseModel(persistent=0.05, measurement=0.02)


def test_the_fit_reads_a_tiny_record_exactly():
    # two calls, each with its own drift (1.10 and 0.90), which the fit takes out as the call's mean log
    offsets = [[1.10 * np.exp(0.01), 1.10 * np.exp(-0.01)], [0.90 * np.exp(0.02), 0.90 * np.exp(-0.02)]]
    measured = [[np.exp(0.03), np.exp(-0.03)], [1.2 * np.exp(0.01), 1.2 * np.exp(-0.01)]]
    m = NoiseModel.fit(offsets, measured)
    # residuals +-0.01 and +-0.02, one degree of freedom per call: sqrt((2 * 0.01^2 + 2 * 0.02^2) / 2)
    assert m.persistent == pytest.approx(np.sqrt(0.01**2 + 0.02**2))
    assert m.measurement == pytest.approx(np.sqrt(0.03**2 + 0.01**2))
    assert m.outlier_share == 0.0
    # what the recorded repeats already give a replayed measurement is taken out of the measurement part
    assert NoiseModel.fit(offsets, measured, recorded=0.01).measurement == pytest.approx(0.03)
    # a call with one configuration says nothing about the spread between configurations
    assert NoiseModel.fit([[1.3]], [[0.7]]) == NoiseModel()


def test_the_fit_counts_outliers_apart():
    measured = [[np.exp(0.01 * k) for k in (-2, -1, 0, 1, 2, -1, 1, 0)] + [1.30]]
    m = NoiseModel.fit([], measured)
    assert m.outlier_share == pytest.approx(1 / 9)
    assert m.outlier_scale == pytest.approx(0.3)
    assert m.measurement < 0.02  # the outlier does not widen the measurement part


def test_the_offset_persists_across_visits_and_the_measurement_noise_does_not(cache_file):
    (d,) = load_datasets(cache_file)
    plain, noisy = ReplayWorkload(d, seed=3), ReplayWorkload(d, seed=3, noise=NoiseModel(persistent=0.05))
    ratios = [noisy.run(CONFIG, 7).total / plain.run(CONFIG, 7).total for _ in range(20)]
    offset = ratios[0]
    assert ratios == pytest.approx([offset] * 20, rel=1e-12) and offset != pytest.approx(1.0)  # one offset
    assert noisy.live_time(CONFIG) == pytest.approx(plain.recorded_time(CONFIG)[0] * offset)
    assert noisy.recorded_time(CONFIG) == plain.recorded_time(CONFIG)  # the recorded value is kept
    # another seed, another offset
    assert ReplayWorkload(d, seed=4, noise=NoiseModel(persistent=0.05)).live_time(CONFIG) != noisy.live_time(
        CONFIG
    )
    jittered = ReplayWorkload(d, seed=3, noise=NoiseModel(measurement=0.05))
    plain = ReplayWorkload(d, seed=3)
    assert len({jittered.run(CONFIG, 7).total / plain.run(CONFIG, 7).total for _ in range(20)}) == 20
    assert jittered.live_time(CONFIG) == plain.recorded_time(CONFIG)[0]


def test_the_noise_is_the_same_under_the_same_seed_whatever_was_measured_before(cache_file):
    (d,) = load_datasets(cache_file)
    a, b = ReplayWorkload(d, seed=5, noise=NOISE), ReplayWorkload(d, seed=5, noise=NOISE)
    b.run({"block_size_x": 64, "block_size_y": 4, "tile": 2}, 7)
    assert [a.run(CONFIG, 7).total for _ in range(5)] == [b.run(CONFIG, 7).total for _ in range(5)]
    c = ReplayWorkload(d, seed=6, noise=NOISE)
    assert c.run(CONFIG, 7).total != ReplayWorkload(d, seed=5, noise=NOISE).run(CONFIG, 7).total


def test_the_noise_has_the_fitted_spread():
    m = NoiseModel(persistent=0.03, measurement=0.02, outlier_share=0.1, outlier_scale=0.5)
    offsets = np.log([m.offset(0, row) for row in range(4000)])
    assert offsets.std() == pytest.approx(0.03, rel=0.05) and abs(offsets.mean()) < 0.003
    draws = np.array([m.draw(0, 7, visit) for visit in range(4000)])
    far = (draws > 1.3) | (draws < 1 / 1.3)  # the outliers, 1.5x slower or faster, as many each way
    assert far.mean() == pytest.approx(0.1, abs=0.02)
    assert np.mean(draws > 1.3) == pytest.approx(0.05, abs=0.015)
    assert np.log(draws[~far]).std() == pytest.approx(0.02, rel=0.1)


def test_a_scored_run_with_noise_compares_live_times(cache_file):
    from launchtune.pipeline.strategies.evaluate import run_one

    (d,) = load_datasets(cache_file)
    plain = run_one(d, "random", 10, 0)
    noisy = run_one(d, "random", 10, 0, noise=NoiseModel(persistent=0.2))
    again = run_one(d, "random", 10, 0, noise=NoiseModel(persistent=0.2))
    assert noisy == again  # deterministic under the seed
    assert "recorded_ratio" not in plain and noisy["noise"]["persistent"] == 0.2
    w = ReplayWorkload(d, seed=0 + 1_000_003, noise=NoiseModel(persistent=0.2))
    best, _ = w.optimum()
    assert noisy["ratio"] == pytest.approx(w.live_time(noisy["config"]) / w.live_time(best))
    assert noisy["recorded_ratio"] == pytest.approx(noisy["time"] / noisy["optimum"])
    assert json.loads(json.dumps(noisy["noise"])) == NoiseModel(persistent=0.2).as_dict()
