"""The surrogate's pick restricted to configurations that can run (launchtune.pipeline.learn.pick)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from launchtune.pipeline.learn.pick import config_key, incumbents, known_failures, predicted_pick, ranked

PARAMS = ["x", "y"]


def _rows() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "gpu_class": ["h100", "h100", "h100", "h100", "h200"],
            "status": ["invalid", "ok", "failed", "ok", "invalid"],
            "x": [1, 2, 3, 4, 5],
            "y": [0, 0, 0, 0, 0],
            "total_ms": [np.nan, 3.0, np.nan, 2.0, np.nan],
        }
    )


def test_known_failures_are_the_invalid_and_failed_configurations_of_the_class():
    assert known_failures(_rows(), "h100", PARAMS) == [{"x": 1, "y": 0}, {"x": 3, "y": 0}]
    assert len(known_failures(_rows(), None, PARAMS)) == 3
    assert known_failures(_rows()[_rows()["status"] == "ok"], "h100", PARAMS) == []


def test_ranked_orders_by_prediction_and_leaves_out_excluded_and_unrunnable():
    keys = [(1,), (2,), (3,), (4,)]
    predicted = np.array([0.5, 0.1, 0.2, 0.1])
    assert ranked(predicted, keys) == [1, 3, 2, 0]  # stable for the tie
    assert ranked(predicted, keys, exclude=[(2,)]) == [3, 2, 0]
    assert ranked(predicted, keys, runnable=lambda i: i != 3) == [1, 2, 0]
    with pytest.raises(ValueError, match="3 predictions for 4 candidates"):
        ranked(predicted[:3], keys)


def test_the_replayed_pick_is_never_a_row_that_failed():
    rows = _rows()[_rows()["gpu_class"] == "h100"].reset_index(drop=True)
    predicted = np.array([0.1, 2.5, 0.2, 2.9])  # the two failing rows are predicted fastest
    out = predicted_pick(rows, predicted, PARAMS, top_k=2)
    assert out["unrestricted"]["status"] == "invalid" and out["unrestricted"]["config"] == {"x": 1, "y": 0}
    assert out["pick"]["config"] == {"x": 2, "y": 0} and out["pick"]["ms"] == 3.0
    assert out["best_ms"] == 2.0 and out["pick_over_best"] == pytest.approx(1.5)
    assert out["best_of_top_k"] == 2.0 and out["top_k_over_best"] == 1.0
    assert out["known_failures"] == 2 and out["skipped"] == 2


def test_config_key_reads_the_parameters_in_order():
    assert config_key({"y": 2, "x": 1, "z": 9}, PARAMS) == (1, 2)


def test_incumbents_are_the_fastest_distinct_ok_configurations_of_the_class():
    rows = pd.concat([_rows(), _rows().iloc[[3]].assign(total_ms=2.5)], ignore_index=True)  # x=4 twice
    assert incumbents(rows, "h100", PARAMS, 5) == [{"x": 4, "y": 0}, {"x": 2, "y": 0}]
    assert incumbents(rows, "h100", PARAMS, 1) == [{"x": 4, "y": 0}]
    assert incumbents(rows, "h200", PARAMS, 5) == []  # its only row is invalid
    assert incumbents(rows, None, PARAMS, 0) == []
