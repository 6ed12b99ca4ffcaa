"""The statistics of a paired comparison (kernels/compare.py): ratio, 95% interval, verdict."""

from __future__ import annotations

import numpy as np
import pytest

from launchtune.kernels.compare import FASTER, SAME, SLOWER, compare, interleaved, verdict


def _rounds(n: int, scale: float, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = 1.0 + noise * rng.standard_normal(n)
    b = scale * (1.0 + noise * rng.standard_normal(n))
    return a, b


@pytest.mark.parametrize("seed", range(5))
def test_the_same_configuration_is_no_measurable_difference(seed):
    a, b = _rounds(21, 1.0, 0.02, seed)
    c = compare(a, b, seed=seed)
    assert c.low <= 1.0 <= c.high and c.verdict == SAME


@pytest.mark.parametrize(("scale", "word"), [(0.9, FASTER), (1.1, SLOWER)])
def test_a_ten_percent_shift_in_small_noise_is_decided(scale, word):
    a, b = _rounds(21, scale, 0.01, 3)
    c = compare(a, b)
    assert c.verdict == word
    assert c.low <= c.ratio <= c.high
    assert abs(c.ratio - scale) < 0.02 and c.high - c.low < 0.05


def test_a_shift_inside_the_noise_is_not_a_speed_up():
    a, b = _rounds(7, 0.98, 0.10, 1)
    assert compare(a, b).verdict == SAME


def test_same_seed_same_numbers_and_the_interval_narrows_with_rounds():
    a, b = _rounds(41, 0.95, 0.03, 2)
    assert compare(a, b, seed=7) == compare(a, b, seed=7)
    few, many = compare(a[:7], b[:7]), compare(a, b)
    assert many.high - many.low < few.high - few.low


def test_verdict_and_bad_input():
    assert verdict(0.9, 0.99) == FASTER and verdict(1.01, 1.2) == SLOWER and verdict(0.99, 1.01) == SAME
    with pytest.raises(ValueError, match="paired rounds"):
        compare([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="no round"):
        compare([0.0, np.nan], [1.0, 1.0])
    assert compare([1.0, 1.0], [2.0, 2.0]).verdict == SLOWER  # every round agrees: no resampling needed


def test_interleaved_alternates_the_order():
    calls = []
    a, b = interleaved(lambda: calls.append("a") or 1.0, lambda: calls.append("b") or 2.0, 4)
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert a == [1.0] * 4 and b == [2.0] * 4
    with pytest.raises(ValueError):
        interleaved(lambda: 1.0, lambda: 1.0, 0)
