"""Recorded caches a strategy cannot search (nested 100,000 deep, every time NaN or not a number, one entry)
are one line naming the file; a time past any measurement counts as a failed configuration; the JSON line a
run prints is JSON (no ``Infinity`` or ``NaN``)."""

from __future__ import annotations

import gzip
import json
import math

import pytest

from launchtune.pipeline.commands.strategies import json_line
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.datasets import MAX_TIME_MS, load_datasets
from tests.strategies.conftest import write_cache


def _cache(tmp_path) -> dict:
    return json.loads(gzip.open(write_cache(tmp_path / "A100.json.gz", "NVIDIA A100-PCIE-40GB"), "rt").read())


def _edit(raw: dict, entry) -> dict:
    return {**raw, "cache": {k: entry(i, v) for i, (k, v) in enumerate(raw["cache"].items())}}


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda raw: '{"cache": ' + "[" * 100_000 + "]" * 100_000 + "}", "not a readable Kernel Tuner cache"),
        (lambda raw: _edit(raw, lambda i, v: {**v, "time": "fast"}), "no configuration ran"),
        (
            lambda raw: _edit(raw, lambda i, v: {**v, "time": math.nan, "times": [math.nan]}),
            "no configuration ran",
        ),
        (
            lambda raw: {**raw, "cache": dict([next(iter(raw["cache"].items()))])},
            "no parameter takes two values",
        ),
    ],
)
def test_a_cache_no_strategy_can_search_is_one_line_naming_it(tmp_path, make, match):
    made = make(_cache(tmp_path))
    path = tmp_path / "bad.json"
    path.write_text(made if isinstance(made, str) else json.dumps(made))
    with pytest.raises(UserError, match=match) as info:
        load_datasets(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_time_past_any_measurement_counts_as_failed(tmp_path):
    raw = _edit(_cache(tmp_path), lambda i, v: {**v, "time": 1e308, "times": [1e308] * 8} if i < 3 else v)
    path = tmp_path / "big.json"
    path.write_text(json.dumps(raw))
    (d,) = load_datasets(path)
    assert (d.frame["status"] == "failed").sum() == 4  # the three and the cache's own failed one
    assert d.frame.loc[d.frame["status"] == "ok", "time"].max() <= MAX_TIME_MS


def test_the_printed_line_is_json_without_infinities():
    line = json_line({"ratio": math.inf, "time": math.nan, "config": {"a": 1}, "xs": [1.0, -math.inf]})
    assert json.loads(line) == {"ratio": None, "time": None, "config": {"a": 1}, "xs": [1.0, None]}
    assert "Infinity" not in line and "NaN" not in line
