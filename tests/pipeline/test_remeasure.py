"""The predicted best re-measured against the default in interleaved rounds, and how the report says it."""

from __future__ import annotations

import numpy as np

from pipeline.learn.report import DEFAULT_NOTE, NUMPY_NOTE, remeasure_line, speedup_text
from pipeline.sweep import worker
from tests.pipeline.conftest import base_spec
from tests.pipeline.fake_workload import make_workload


class ByParam:
    """A model that ranks the fake workload's optimum (a 4 x 64, b 2 x 64) first."""

    def predict(self, X: np.ndarray) -> np.ndarray:
        return (
            np.abs(X[:, 0] - 4) + np.abs(X[:, 1] - 64) / 32 + np.abs(X[:, 2] - 2) + np.abs(X[:, 3] - 64) / 32
        )


def _remeasure(monkeypatch, backend: str) -> dict:
    spec = {**base_spec(), "options": {}}
    # the fake workload on a pretend device: the backend facts decide whether rounds are interleaved
    monkeypatch.setitem(
        worker._CACHE, worker._workload_key(spec), (make_workload("demo", "8x4"), {"backend": backend})
    )
    features = ["a.blocks", "a.threads", "b.blocks", "b.threads"]
    return worker.remeasure_task(spec, ByParam(), features, [], pool=50, top_k=2, repeats=1, seed=0, rounds=9)


def test_a_gpu_backend_gets_interleaved_rounds_an_interval_and_a_verdict(monkeypatch):
    result = _remeasure(monkeypatch, "cupy")
    comp = result["comparison"]
    assert result["candidates"][0]["config"] == {
        "a.blocks": 4,
        "a.threads": 64,
        "b.blocks": 2,
        "b.threads": 64,
    }
    assert comp["rounds"] == 9 and len(comp["default_ms"]) == len(comp["pick_ms"]) == 9
    # the fake times are 2.2 ms at the optimum against 2.82 ms at the default, with 1% noise
    assert 0.74 < comp["low"] <= comp["ratio"] <= comp["high"] < 0.82
    assert comp["verdict"] == "faster"
    line = remeasure_line(result["candidates"][0], result["default"], comp, "cupy")
    assert "(95%, 9 rounds): faster" in line and "default 2.8" in line


def test_the_numpy_backend_reports_no_speed_up(monkeypatch):
    result = _remeasure(monkeypatch, "numpy")
    assert result["comparison"] is None and result["backend"] == "numpy"
    assert speedup_text(None, "numpy") == NUMPY_NOTE
    assert NUMPY_NOTE in remeasure_line(result["candidates"][0], result["default"], None, "numpy")


def test_a_pick_that_is_the_default_reports_no_speed_up(monkeypatch):
    result = _remeasure(monkeypatch, "cupy")
    comp = result["comparison"]
    default = result["default"]
    same = {**result["candidates"][0], "config": dict(default["config"])}
    assert DEFAULT_NOTE in remeasure_line(same, default, comp, "cupy")
    assert "faster" not in remeasure_line(same, default, comp, "cupy")
    assert DEFAULT_NOTE not in remeasure_line(result["candidates"][0], default, comp, "cupy")
