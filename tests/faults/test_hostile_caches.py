"""Kernel Tuner caches as they may come: entries of any shape (a list where a parameter's value belongs,
text, nested or overflowing ``times``), a gzip that inflates without end. Each is read and replayed to a
finite time, or refused with one line naming the file and the entry; never another exception."""

from __future__ import annotations

import gzip
import json
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store import cache_json
from launchtune.pipeline.store.datasets import load_kernel_tuner_cache
from launchtune.pipeline.strategies.replay import ReplayWorkload

numbers = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**1100), 2**1100)
odd = st.none() | st.booleans() | st.text(max_size=4) | numbers
values = st.sampled_from([1, 2, 4]) | st.lists(st.integers(1, 4), max_size=2) | odd
times = st.lists(numbers | st.lists(numbers, max_size=2) | st.text(max_size=2), max_size=4) | odd
entries = st.lists(
    st.fixed_dictionaries(
        {"a": values, "b": st.sampled_from([8, 16])},
        optional={"time": numbers | st.text(max_size=20), "times": times},
    ),
    min_size=1,
    max_size=6,
)


def _cache(entries: list[dict]) -> dict:
    return {
        "tune_params_keys": ["a", "b", "a"],
        "cache": {f"{i}": e for i, e in enumerate(entries)},
        "device_name": "NVIDIA A100-PCIE-40GB",
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries)
def test_any_cache_entries_are_replayed_to_a_finite_time_or_refused_in_one_line(entries):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "A100.json"
        path.write_text(json.dumps(_cache(entries)))
        try:
            dataset = load_kernel_tuner_cache(path)
            workload = ReplayWorkload(dataset, seed=0)
            timing = workload.run(workload.space().default, 3)
        except UserError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
        else:
            assert math.isfinite(timing.total) or not workload.check(workload.space().default).ok


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"a": [1, 2]}, "cache entry '0': parameter 'a' is [1, 2], not one value"),
        ({"times": "abc"}, "cache entry '0': times: expected a list of numbers, got 'abc'"),
        ({"times": [[1, 2], [3]]}, "cache entry '0': times: expected a list of numbers"),
    ],
)
def test_malformed_entries_are_one_line_naming_the_entry(tmp_path, change, why):
    entries = [{"a": a, "b": 8, "time": 1.0 + a, "times": [1.0 + a] * 2} for a in (1, 2, 4)]
    entries[0].update(change)
    path = tmp_path / "A100.json"
    path.write_text(json.dumps(_cache(entries)))
    with pytest.raises(UserError) as info:
        load_kernel_tuner_cache(path)
    assert str(info.value) == f"{path}: {why}" or str(info.value).startswith(f"{path}: {why}")


def test_a_gzip_that_inflates_past_the_cap_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_json, "MAX_CACHE_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (8 << 20)))  # 8 MB of blanks in 8 KB
    assert bomb.stat().st_size < 64 << 10
    with pytest.raises(UserError, match=r"bomb.json.gz: inflates past 1,048,576 bytes"):
        load_kernel_tuner_cache(bomb)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (2 << 20))
    with pytest.raises(
        UserError, match=r"big.json: 2,097,152 bytes; a Kernel Tuner cache file holds at most"
    ):
        load_kernel_tuner_cache(big)


def test_repeats_that_overflow_are_left_out_and_the_time_answers(tmp_path):
    """Times whose sum overflows made the replayed mean infinite (NaN in ``combine``): they are left out, the
    entry's own time answers, and a time past any measurement counts as failed (``usable``)."""
    entries = [{"a": a, "b": 8, "time": 1.0 + a, "times": [1.0 + a] * 2} for a in (1, 2, 4)]
    entries[0]["times"] = [1e308, 1e308]
    path = tmp_path / "A100.json"
    path.write_text(json.dumps(_cache(entries)))
    dataset = load_kernel_tuner_cache(path)
    assert [len(t) for t in dataset.frame["times"]] == [0, 2, 2]
    workload = ReplayWorkload(dataset, seed=0)
    for config in workload.candidates():
        assert math.isfinite(workload.run(config, 3).total)
