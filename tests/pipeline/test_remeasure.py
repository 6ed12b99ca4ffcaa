"""The predicted best re-measured against the default in interleaved rounds, and how the report says it."""

from __future__ import annotations

import numpy as np

from launchtune.pipeline.results.report import DEFAULT_NOTE, NUMPY_NOTE, remeasure_line, speedup_text
from launchtune.pipeline.sweep import worker
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


class FailingFirst:
    """A model that ranks the fake workload's configurations failing their check (a.blocks 8, b.threads 64)
    best, as the fused sweep's model ranked a block over its register limit best."""

    def predict(self, X: np.ndarray) -> np.ndarray:
        return ByParam().predict(X) + 100.0 * ~((X[:, 0] == 8) & (X[:, 3] == 64))


def _remeasure_with(monkeypatch, model, exclude=None, top_k=2) -> dict:
    spec = {**base_spec(), "options": {}}
    monkeypatch.setitem(
        worker._CACHE, worker._workload_key(spec), (make_workload("demo", "8x4"), {"backend": "cupy"})
    )
    features = ["a.blocks", "a.threads", "b.blocks", "b.threads"]
    return worker.remeasure_task(
        spec, model, features, [], pool=200, top_k=top_k, repeats=1, seed=0, rounds=3, exclude=exclude
    )


def _fails_check(c: dict) -> bool:
    return c["a.blocks"] == 8 and c["b.threads"] == 64


def test_a_pick_that_fails_its_check_is_skipped_for_the_next_runnable_one(monkeypatch):
    result = _remeasure_with(monkeypatch, FailingFirst())
    assert len(result["candidates"]) == 2
    assert all(c["status"] == "ok" and not _fails_check(c["config"]) for c in result["candidates"])
    assert result["rejected"] and all(_fails_check(c["config"]) for c in result["rejected"])
    assert all(c["status"] == "invalid" and "simulated race" in c["reason"] for c in result["rejected"])
    assert result["comparison"] is not None  # the interleaved rounds time a pick that ran


def test_configurations_recorded_as_failing_are_never_measured(monkeypatch):
    bad = [
        {"a.blocks": 8, "a.threads": t, "b.blocks": b, "b.threads": 64} for t in (32, 64) for b in (1, 2, 4)
    ]
    result = _remeasure_with(monkeypatch, FailingFirst(), exclude=bad)
    assert result["excluded_known_failures"] == len(bad)
    assert result["rejected"] == []
    assert len(result["candidates"]) == 2 and not any(_fails_check(c["config"]) for c in result["candidates"])


def test_the_report_takes_the_first_candidate_that_ran_also_from_old_folders():
    from launchtune.pipeline.results.report import first_runnable

    bad = {"config": {"a.blocks": 8}, "status": "invalid", "reason": "over the register limit"}
    good = {"config": {"a.blocks": 4}, "status": "ok", "total_ms": 2.0, "predicted_ms": 1.9}
    assert first_runnable({"candidates": [bad, good]}) is good
    assert first_runnable({"candidates": [bad]}) is None
    assert first_runnable(None) is None


def test_configurations_that_differ_only_in_unused_parameters_are_measured_once(monkeypatch):
    import dataclasses

    from launchtune.kernels.space import Inactive

    spec = {**base_spec(), "options": {}}
    workload = make_workload("demo", "8x4")
    # where a.blocks is 4, b.blocks is unused: the model's three best (b.blocks 2, 1, 4) are one configuration
    rule = Inactive("a.blocks", (4,), ("b.blocks",))
    workload._space = dataclasses.replace(workload.space(), inactive=(rule,))
    monkeypatch.setitem(worker._CACHE, worker._workload_key(spec), (workload, {"backend": "cupy"}))
    features = ["a.blocks", "a.threads", "b.blocks", "b.threads"]
    result = worker.remeasure_task(
        spec, ByParam(), features, [], pool=200, top_k=3, repeats=1, seed=0, rounds=3
    )
    keys = [workload.space().active_key(c["config"]) for c in result["candidates"]]
    assert len(keys) >= 3 and len(set(keys)) == len(keys)
    assert keys[0] == (4, 64, None, 64)
    assert sum(k[:2] == (4, 64) and k[3] == 64 for k in keys) == 1
    # a.blocks decides a rule, so each of its values is a branch: the best-ranked of each is measured too
    # (a.blocks 8's leader fails its check, so that branch is in `rejected`)
    top3 = sorted(result["candidates"], key=lambda c: c["predicted_rank"])[:3]
    assert [c["predicted_rank"] for c in top3] == [0, 1, 2]
    ran = {c["config"]["a.blocks"] for c in result["candidates"]}
    tried = ran | {c["config"]["a.blocks"] for c in result["rejected"]}
    assert tried == {1, 2, 4, 8}


def test_branch_leaders_are_each_branch_best_ranked():
    from launchtune.pipeline.learn.pick import branch_leaders

    # candidates 0..5 in branches a a b a c b; the model's order 3 1 4 0 5 2
    assert branch_leaders([3, 1, 4, 0, 5, 2], ["a", "a", "b", "a", "c", "b"]) == [0, 2, 4]
    assert branch_leaders([], []) == []


class OptimumFourth:
    """Ranks the fake workload's optimum fourth: the measurement, not the model, must make it the pick."""

    def predict(self, X: np.ndarray) -> np.ndarray:
        at_optimum = (X[:, 0] == 4) & (X[:, 1] == 64) & (X[:, 2] == 2) & (X[:, 3] == 64)
        return ByParam().predict(X) + 1.5 * at_optimum  # three configurations at 1.0 rank ahead


def test_the_pick_is_the_fastest_of_the_re_measured_top_k(monkeypatch):
    result = _remeasure_with(monkeypatch, OptimumFourth(), top_k=4)
    first = result["candidates"][0]
    assert first["config"] == {"a.blocks": 4, "a.threads": 64, "b.blocks": 2, "b.threads": 64}
    assert first["predicted_rank"] > 0
    times = [c["total_ms"] for c in result["candidates"]]
    assert times == sorted(times)
    assert sorted(c["predicted_rank"] for c in result["candidates"]) == [0, 1, 2, 3]


def test_recorded_rows_are_ranked_beside_the_pool_and_marked(monkeypatch):
    """The sweep's fastest rows (``validate.incumbents``) join the pool: an optimum the fresh pool lacks is
    still found when the model ranks it first, and the candidates say which were recorded."""
    spec = {**base_spec(), "options": {}}
    monkeypatch.setitem(
        worker._CACHE, worker._workload_key(spec), (make_workload("demo", "8x4"), {"backend": "cupy"})
    )
    features = ["a.blocks", "a.threads", "b.blocks", "b.threads"]
    optimum = {"a.blocks": 4, "a.threads": 64, "b.blocks": 2, "b.threads": 64}
    common = dict(pool=1, top_k=2, repeats=1, seed=3, rounds=3)
    alone = worker.remeasure_task(spec, ByParam(), features, [], **common)
    assert all(c["config"] != optimum and not c["recorded"] for c in alone["candidates"])
    result = worker.remeasure_task(spec, ByParam(), features, [], **common, recorded=[optimum])
    assert result["candidates"][0]["config"] == optimum and result["candidates"][0]["recorded"]
    assert [c["recorded"] for c in result["candidates"]].count(True) == 1


class WorstFirst:
    """A model that ranks the fake workload's optimum last."""

    def predict(self, X: np.ndarray) -> np.ndarray:
        return -ByParam().predict(X)


def test_recorded_rows_are_measured_whatever_their_rank(monkeypatch):
    """An incumbent the model ranks last is still re-measured, and being the fastest it is the pick."""
    spec = {**base_spec(), "options": {}}
    monkeypatch.setitem(
        worker._CACHE, worker._workload_key(spec), (make_workload("demo", "8x4"), {"backend": "cupy"})
    )
    features = ["a.blocks", "a.threads", "b.blocks", "b.threads"]
    optimum = {"a.blocks": 4, "a.threads": 64, "b.blocks": 2, "b.threads": 64}
    result = worker.remeasure_task(
        spec, WorstFirst(), features, [], pool=50, top_k=2, repeats=1, seed=0, rounds=3, recorded=[optimum]
    )
    assert result["candidates"][0]["config"] == optimum and result["candidates"][0]["recorded"]
    assert result["candidates"][0]["predicted_rank"] == result["pool"] - 1  # ranked last, measured anyway
    assert len(result["candidates"]) == 3


def _cpu_report(backend: str) -> str:
    """report.md of one class whose best sampled row (53.06 ms) is slower than the default's re-measured
    time (25.38 ms), as a loaded CPU gives them."""
    import pandas as pd

    from launchtune.pipeline.results.report import _markdown, class_summary

    params = ["a.blocks", "a.threads"]
    frame = pd.DataFrame(
        {
            "gpu_class": "cpu",
            "status": "ok",
            "device_name": "host",
            "device_class": "cpu",
            "backend": backend,
            "sample_id": [0, 1, 2],
            "a.blocks": [1, 2, 4],
            "a.threads": [32, 64, 128],
            "total_ms": [53.06, 60.2, 71.0],
        }
    )
    default = {"config": {"a.blocks": 8, "a.threads": 32}, "status": "ok", "total_ms": 25.38}
    pick = {"config": {"a.blocks": 2, "a.threads": 64}, "status": "ok", "total_ms": 31.93, "predicted_ms": 50}
    validation = {"cpu": {"candidates": [pick], "default": default, "comparison": None}}
    summary = class_summary(frame, "cpu", {"params": params, "default": default["config"]}, {}, validation)
    report = {
        "sweep_id": "cpu",
        "workload": "cfd",
        "case": "inlet",
        "size": "64x24",
        "seed": 0,
        "created": "now",
        "merged_rows": 3,
        "classes": {"cpu": summary},
        "models": {},
        "figures": [],
    }
    return _markdown(report)


def test_a_cpu_report_says_its_spread_is_noise_where_the_best_sample_is_slower_than_the_default():
    text = _cpu_report("numpy")
    (note,) = [line for line in text.splitlines() if "launch parameters change nothing" in line]
    assert note.startswith("**cpu** ran on the numpy backend")
    assert "best recorded 53.06 ms, default 25.38 ms, predicted best 31.93 ms" in note
    assert "timing noise" in note and "slower than the default" in note
    assert "launch parameters change nothing" not in _cpu_report("cupy")
