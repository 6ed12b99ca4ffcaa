"""Metrics and the objective of a kernel spec: parsed from the allow-listed expression language (code is one
line, exit 2), evaluated from what was measured, and the one lower-is-better number (the cost) every ranking
reads: the worker's rows and answers, a search's pick and its re-measure against the default."""

from __future__ import annotations

import itertools
import math

import pyarrow.parquet as pq
import pytest

from launchtune.kernels.kernel import workload as workload_module
from launchtune.kernels.kernel.errors import SpecError
from launchtune.kernels.kernel.spec import load_kernel_spec
from launchtune.kernels.objective import Objective, ObjectiveError, known, parse_flag
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.spec import load_spec
from tests.kernel import fake_cupy
from tests.kernel.test_cli import _sweep
from tests.pipeline.conftest import one_line_error, run_cli_here

PER_ELEMENT = {"ns_per_element": "time * 1e6 / problem_size_x", "ns_per_tile": "ns_per_element * tile"}


def test_metrics_and_objective_are_read_and_evaluated(write_spec):
    spec = load_kernel_spec(write_spec(metrics=PER_ELEMENT, objective={"maximize": "ns_per_tile"}))
    assert spec.metric_names == ["ns_per_element", "ns_per_tile"]
    assert spec.objective == Objective("ns_per_tile", maximize=True) and not spec.needs_energy
    metrics, cost = spec.evaluate({"block_size_x": 32, "tile": 4}, (1000, 1, 1), {"time": 0.5})
    assert metrics == {"ns_per_element": pytest.approx(500.0), "ns_per_tile": pytest.approx(2000.0)}
    assert cost == pytest.approx(1 / 2000.0)  # maximised: its reciprocal, lower is better


def test_the_default_objective_is_time(write_spec):
    spec = load_kernel_spec(write_spec())
    assert spec.objective.is_time and spec.metrics == ()
    assert spec.evaluate({"block_size_x": 32, "tile": 1}, (1000, 1, 1), {"time": 0.7}) == ({}, 0.7)


def test_energy_metrics_need_the_counter_and_are_none_without_it(write_spec):
    spec = load_kernel_spec(write_spec(metrics={"mj_per_elem": "energy_mJ / problem_size_x"},
                                       objective={"minimize": "mj_per_elem"}))  # fmt: skip
    assert spec.needs_energy
    metrics, cost = spec.evaluate({"block_size_x": 32, "tile": 1}, (1000, 1, 1), {"time": 1.0})
    assert metrics == {"mj_per_elem": None} and math.isnan(cost)
    assert load_kernel_spec(write_spec(objective={"minimize": "energy_mJ"})).needs_energy


@pytest.mark.parametrize(
    ("changes", "field", "why"),
    [
        ({"metrics": {"gflops": "lambda p: p['time']"}}, "metrics.gflops", "lambda is not allowed"),
        ({"metrics": {"gflops": "p['time'] * 2"}}, "metrics.gflops", "subscript is not allowed"),
        ({"metrics": {"x": "__import__('os').getcwd()"}}, "metrics.x", "is not allowed"),
        ({"metrics": {"tile": "time"}}, "metrics", "not a usable metric name"),
        ({"metrics": ["time / tile"]}, "metrics", "expected a mapping"),
        ({"objective": "lambda r: r['time']"}, "objective", "expected {minimize: NAME}"),
        ({"objective": {"minimize": "gflops"}}, "objective", "'gflops' is neither measured nor a metric"),
        ({"objective": {"fastest": "time"}}, "objective", "expected {minimize: NAME}"),
    ],
)
def test_a_metric_or_objective_that_is_code_or_wrong_is_one_line(write_spec, changes, field, why):
    path = write_spec(**changes)
    with pytest.raises(SpecError) as info:
        load_kernel_spec(path)
    line = str(info.value)
    assert line.startswith(f"{path}: {field}") and why in line and "\n" not in line


def test_a_metric_that_is_code_through_the_real_cli_is_exit_2(tmp_path, write_spec):
    kernel = write_spec(metrics={"gflops": "lambda p: 2 * p['problem_size_x'] / p['time']"})
    result = run_cli_here("sweep", _sweep(tmp_path), "--out", str(tmp_path / "out"), cwd=tmp_path)
    line = one_line_error(result)
    assert f"{kernel}: metrics.gflops" in line and "lambda is not allowed" in line and "not Python" in line
    assert not (tmp_path / "out").exists()
    with pytest.raises(UserError, match="metrics.gflops"):
        load_spec(_sweep(tmp_path))


def test_objective_directions_and_flags():
    assert known("GFLOP/s").maximize and known("GB/s").maximize and not known("energy").maximize
    assert not known("time").maximize
    with pytest.raises(ObjectiveError, match="--objective 'score:max'"):
        known("score")
    assert parse_flag("score:max") == Objective("score", True)
    assert parse_flag("score:min") == Objective("score", False)
    with pytest.raises(ObjectiveError):
        parse_flag("score:up")
    up = Objective("GFLOP/s", True)
    assert up.cost(200.0) < up.cost(100.0) and math.isnan(up.cost(0.0)) and up.value(up.cost(250.0)) == 250.0


# ------------------------------------------------------------------------------- through the worker


@pytest.fixture
def make(monkeypatch, write_spec):
    """A workload on fake CuPy whose launch takes 0.25 ms whatever the configuration: only a metric tells
    configurations apart."""
    monkeypatch.setattr(workload_module, "get_backend", lambda name: fake_cupy.fake_backend())

    def build(**changes):
        return workload_module.make_workload("scale", None, "cupy", spec=str(write_spec(**changes)),
                                             compile_workers=0)  # fmt: skip

    return build


FACTS = {"backend": "cupy", "gpu_class": "h100", "device_name": "fake", "sm_count": 1,
         "peak_fp64_gflops": 1.0, "spec_bandwidth_gbs": 1.0, "spec_memory_gb": 80.0,
         "measured_bandwidth_gbs": 1.0, "cuda_visible_devices": "0", "pci_bus_id": "0"}  # fmt: skip


def _worker_spec(w, tmp_path):
    from launchtune.pipeline.store.spec import parse_spec
    from launchtune.pipeline.sweep import worker

    sweep = {"name": "k", "workload": "kernel", "case": "scale", "size": "1000",
             "options": {"spec": str(w.spec.path)}}  # fmt: skip
    spec = parse_spec(sweep, str(tmp_path / "sweep.yaml")).to_dict()
    worker._CACHE[worker._workload_key(spec)] = (w, FACTS)
    return spec


def test_rows_keep_time_each_metric_and_the_objective(make, tmp_path):
    from launchtune.pipeline.sweep import worker

    w = make(metrics={"ms_per_tile": "time / tile"}, objective={"minimize": "ms_per_tile"})
    assert w.describe()["objective"] == {"minimize": "ms_per_tile"}
    assert w.describe()["measures"] == ["metric.ms_per_tile"]
    spec = _worker_spec(w, tmp_path)
    plan = {"params": w.space().names, "kernels": ["scale"], **worker._objective_facts(w), "search": True}
    rows = [(i, "search", {"block_size_x": 32, "tile": t}) for i, t in enumerate([1, 4, 2])]
    path = tmp_path / "shards" / "gpu_class=h100" / "shard-search-00000.parquet"
    try:
        result = worker.measure_batch(spec, plan, "h100", "00000", rows, str(path), str(tmp_path))
    finally:
        worker._CACHE.clear()
    shard = pq.read_table(path)
    frame = shard.to_pandas()
    assert frame["total_ms"].tolist() == [0.25, 0.25, 0.25]
    assert frame["metric.ms_per_tile"].tolist() == [0.25, 0.0625, 0.125]
    assert frame["objective"].tolist() == [0.25, 0.0625, 0.125]
    assert b'"minimize": "ms_per_tile"' in shard.schema.metadata[b"launchtune.objective"]
    # the strategy is answered the objective, not the time, and no per-kernel times that would not add up
    assert [a["total_ms"] for a in result["answers"]] == [0.25, 0.0625, 0.125]
    assert all(a["kernels"] == {} for a in result["answers"])


def test_the_pick_is_the_best_objective_and_its_comparison_is_on_it(make, tmp_path):
    from launchtune.pipeline.sweep import remeasure, worker

    w = make(
        metrics={"elements_per_ms": "problem_size_x * tile / time"}, objective={"maximize": "elements_per_ms"}
    )
    spec = _worker_spec(w, tmp_path)
    picks = [{"block_size_x": 32, "tile": t} for t in (1, 2, 4)]
    try:
        answer = remeasure.pick_task(spec, picks, repeats=3, seed=0, rounds=5)
    finally:
        worker._CACHE.clear()
    assert answer["candidates"][0]["config"]["tile"] == 4  # the highest elements per ms, at equal time
    # default tile 1 against the pick tile 4: the default costs 4x the pick
    assert answer["comparison"]["default_ms"][0] == pytest.approx(4 * answer["comparison"]["pick_ms"][0])


def test_a_maximised_metric_without_a_value_is_a_failed_row(make, tmp_path):
    from launchtune.pipeline.sweep import worker

    w = make(metrics={"rate": "tile - 1"}, objective={"maximize": "rate"})
    spec = _worker_spec(w, tmp_path)
    try:
        m = worker.measure_one(spec, {"block_size_x": 32, "tile": 1}, 3, False)
        good = worker.measure_one(spec, {"block_size_x": 32, "tile": 2}, 3, False)
    finally:
        worker._CACHE.clear()
    assert m["status"] == "failed" and "maximize rate: no value" in m["reason"]
    assert good["status"] == "ok" and good["objective"] == 1.0


def test_without_an_energy_counter_time_still_works_and_the_rows_say_why(make, tmp_path, monkeypatch):
    import sys

    from launchtune.pipeline.sweep import worker

    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML here, whatever the machine has
    w = workload_module.make_workload("scale", None, "cupy", spec=str(make().spec.path), compile_workers=0,
                                      energy="true")  # fmt: skip
    assert w.measures() == ["energy_mJ", "power_W"]
    spec = _worker_spec(w, tmp_path)
    try:
        m = worker.measure_one(spec, {"block_size_x": 32, "tile": 2}, 3, False)
    finally:
        worker._CACHE.clear()
    assert m["status"] == "ok" and m["total_ms"] == 0.25
    assert m["reason"].startswith("no energy counter: NVML is not available") and "\n" not in m["reason"]
    assert "energy_mJ" not in m["measures"]


def test_an_energy_objective_without_a_counter_is_one_line(make, monkeypatch):
    import sys

    from launchtune.kernels.workload import WorkloadError

    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(WorkloadError) as info:
        make(objective={"minimize": "energy_mJ"})
    line = str(info.value)
    assert "objective: minimize energy_mJ needs the energy counter, and this machine has none" in line
    assert "NVML is not available" in line
    assert "\n" not in line


def test_a_live_search_is_answered_the_objective_and_its_merged_rows_keep_it(make, tmp_path):
    """The live path of ``sweep --strategy evolve`` in one process (Dask's in-process cluster, CuPy stood
    in for): the strategy is answered the objective's cost, and the merged rows rank by it."""
    from dataclasses import replace
    from datetime import UTC, datetime

    from distributed import Client, LocalCluster

    from launchtune.pipeline.store.folder import PLAN_FACTS, SweepFolder
    from launchtune.pipeline.store.shards import load_merged, merge
    from launchtune.pipeline.store.spec import SearchSpec, parse_spec
    from launchtune.pipeline.sweep import worker
    from launchtune.pipeline.sweep.search import run_searches, search_pool_plan, top_picks

    w = make(metrics={"ms_per_tile": "time / tile"}, objective={"minimize": "ms_per_tile"})
    sweep = {"name": "k", "workload": "kernel", "case": "scale", "size": "1000",
             "options": {"spec": str(w.spec.path)}}  # fmt: skip
    spec = replace(parse_spec(sweep, str(tmp_path / "sweep.yaml")), search=SearchSpec("evolve", 6, ()))
    worker._CACHE[worker._workload_key(spec.to_dict())] = (w, FACTS)
    out = tmp_path / "out"
    try:
        with (
            LocalCluster(n_workers=1, threads_per_worker=1, processes=False, resources={"h100": 1}) as c,
            Client(c) as client,
        ):
            plan = search_pool_plan(client, spec, "h100", 60)
            assert plan["objective"] == {"minimize": "ms_per_tile"} and plan["measures"] == [
                "metric.ms_per_tile"
            ]
            folder = SweepFolder(out)
            facts = {k: v for k, v in plan.items() if k != "pool"}
            folder.write_plan(
                "h100", {**facts, "n_configs": len(plan["pool"]), "search": spec.to_dict()["search"]}
            )
            folder.write_meta({"spec": spec.to_dict(), "planning_key": spec.planning_key(),
                               "plan": {k: plan[k] for k in PLAN_FACTS if k in plan},
                               "updated": datetime.now(UTC).isoformat()})  # fmt: skip
            found = run_searches(client, spec, {"h100": plan}, out, {"h100": 1}, [], lambda _: None, 60)[
                "h100"
            ]
            merge(out)
    finally:
        worker._CACHE.clear()
    (config, cost), *_ = top_picks(found.session, 1)
    assert config["tile"] == 4 and cost == pytest.approx(0.0625)  # every launch takes 0.25 ms here
    rows = load_merged(out)
    assert (rows["objective"] == rows["metric.ms_per_tile"]).all() and (rows["total_ms"] == 0.25).all()


def test_kernel_tuners_baseline_is_told_the_objective_and_its_rows_keep_it(make, tmp_path, monkeypatch):
    """``kt:<strategy>`` passes the spec's objective, its direction and each metric (evaluating the same
    expression) to ``tune_kernel``; its rows have the objective's columns. Kernel Tuner stood in for."""
    kernel_tuner = pytest.importorskip("kernel_tuner")
    from launchtune.pipeline.sweep import worker
    from launchtune.pipeline.sweep.kernel_tuner_live import kernel_tuner_task

    told = {}

    def tune_kernel(**kw):  # every configuration its restriction admits, each at 0.25 ms
        told.update(kw)
        results = []
        for values in itertools.product(*kw["tune_params"].values()):
            p = dict(zip(kw["tune_params"], values, strict=True))
            if kw["restrictions"][0]._func(*values):
                p["time"] = 0.25
                p.update({name: f(p) for name, f in kw["metrics"].items()})
                results.append(p)
        return results, {}

    monkeypatch.setattr(kernel_tuner, "tune_kernel", tune_kernel)
    w = make(metrics={"tiles_per_ms": "tile / time"}, objective={"maximize": "tiles_per_ms"})
    spec = _worker_spec(w, tmp_path)
    plan = {"params": w.space().names, "kernels": ["scale"], **worker._objective_facts(w)}
    shard = tmp_path / "shards" / "gpu_class=h100" / "shard-search-kt.parquet"
    try:
        done = kernel_tuner_task(spec, plan, "h100", "random_sample", 9, str(shard),
                                 str(tmp_path / "search" / "h100.kt-cache.json"), str(tmp_path))  # fmt: skip
    finally:
        worker._CACHE.clear()
    assert told["objective"] == "tiles_per_ms" and told["objective_higher_is_better"] is True
    assert done["objective"] == {"maximize": "tiles_per_ms"}
    best = min(done["answers"], key=lambda a: a["cost"])
    assert best["config"]["tile"] == 4 and best["cost"] == pytest.approx(1 / 16)
    frame = pq.read_table(shard).to_pandas()
    assert frame["metric.tiles_per_ms"].max() == 16.0 and frame["objective"].min() == pytest.approx(1 / 16)
