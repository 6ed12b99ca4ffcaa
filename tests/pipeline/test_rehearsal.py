"""The replay worker mode and what the scale rehearsal changed (issue 18): a recorded dataset as a sweep
workload (sleeping, injected failures, a worker killing itself mid-batch), the vectorised one-row-per-
configuration of the datasets, and the capped training rows."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from launchtune.kernels.workload import WorkloadError
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.learn.design import training_rows
from launchtune.pipeline.store.datasets import STATUS, TIME, _one_row_per_config
from launchtune.pipeline.store.spec import parse_spec
from launchtune.pipeline.sweep.rehearsal import KILL_ENV, RehearsalWorkload
from launchtune.pipeline.sweep.worker import build_workload
from tests.pipeline.conftest import base_spec, run_cli


def _recorded(path: Path) -> Path:
    """A small recorded sweep: two kernels on a full 4 x 3 x 2 x 2 grid, times a known function."""
    rows = []
    for i, (ab, at, bb, bt) in enumerate(itertools.product((1, 2, 4, 8), (32, 64, 128), (1, 2), (32, 64))):
        a, b = 1.0 + 0.1 * ab + at / 640, 2.0 + bb / 10 + bt / 320
        rows.append(
            {"sample_id": i, "gpu_class": "h100", "status": "ok", "total_ms": a + b + 0.5}
            | {"a.blocks": ab, "a.threads": at, "b.blocks": bb, "b.threads": bt, "ms.a": a, "ms.b": b}
        )
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_one_row_per_config_pools_repeats_and_keeps_first_appearance_order():
    work = pd.DataFrame(
        {
            "p": [3, 1, 3, 2, 1, 4],
            TIME: [1.0, 5.0, 3.0, np.nan, 7.0, 2.0],
            STATUS: ["ok", "ok", "ok", "failed", "failed", "ok"],
            "k": [0.5, 2.0, 1.5, 9.0, 3.0, 1.0],
        }
    )
    work.loc[work[STATUS] != "ok", TIME] = np.nan
    work["_times"] = [
        np.array([1.0, 1.1]),
        np.empty(0),
        np.array([3.0]),
        np.empty(0),
        np.empty(0),
        np.empty(0),
    ]
    frame = _one_row_per_config(work, ["p"], ["k"])
    assert frame["p"].tolist() == [3, 1, 2, 4]  # first appearance
    by = frame.set_index("p")
    assert by.loc[3, TIME] == 2.0 and by.loc[3, "k"] == 1.0  # medians of the two ok rows
    assert by.loc[3, "times"].tolist() == [1.0, 1.1, 3.0]  # their repeats pooled
    assert by.loc[1, TIME] == 5.0 and by.loc[1, STATUS] == "ok"  # one of two ok: that one
    assert np.isnan(by.loc[2, TIME]) and np.isnan(by.loc[2, "k"]) and by.loc[2, STATUS] == "failed"
    assert len(by.loc[2, "times"]) == 0
    assert by.loc[4, TIME] == 2.0 and by.loc[4, "k"] == 1.0


def test_replay_sleeps_the_recorded_time_scaled_and_fails_the_same_configurations(tmp_path, monkeypatch):
    path = _recorded(tmp_path / "rec.parquet")
    slept = []
    monkeypatch.setattr("launchtune.pipeline.sweep.rehearsal.time.sleep", slept.append)
    w = RehearsalWorkload("x", "8x4", "numpy", str(path), time_scale=2.0, fail_fraction=0.25)
    twin = RehearsalWorkload("x", "8x4", "numpy", str(path), time_scale=2.0, fail_fraction=0.25)
    configs = w.space().sample(48, 0)
    failed = [c for c in configs if w.fails(c)]
    assert failed == [c for c in configs if twin.fails(c)]  # decided by the configuration, not by chance
    assert 4 <= len(failed) <= 20  # 25% of 48 = 12
    for c in configs:
        if w.fails(c):
            with pytest.raises(RuntimeError, match="injected failure"):
                w.run(c, 1)
            continue
        before = len(slept)
        t = w.run(c, 1)
        assert len(slept) == before + 1
        assert slept[-1] == pytest.approx(2.0 * t.total / 1000)
        assert t.total == pytest.approx(w.replay.recorded_time(c)[0])
    straggly = RehearsalWorkload("x", "8x4", "numpy", str(path), straggler_fraction=1.0, straggler_factor=3)
    assert straggly.sleep_ms(configs[0], 10.0) == pytest.approx(30.0)


def test_replay_is_a_registered_workload_with_clear_errors(tmp_path):
    path = _recorded(tmp_path / "rec.parquet")
    spec = {"workload": "replay", "case": "x", "size": "8x4", "backend": "numpy"}
    assert isinstance(build_workload({**spec, "options": {"dataset": str(path)}}), RehearsalWorkload)
    assert build_workload({**spec, "options": {"dataset": str(path)}}).keeps_state_on_failure
    with pytest.raises(WorkloadError, match="options.dataset"):
        build_workload({**spec, "options": {}})
    with pytest.raises(WorkloadError, match="fail_fraction"):
        build_workload({**spec, "options": {"dataset": str(path), "fail_fraction": 2}})
    with pytest.raises(WorkloadError, match="unknown replay option 'kill_dir'"):
        build_workload({**spec, "options": {"dataset": str(path), "kill_dir": str(tmp_path)}})
    with pytest.raises(WorkloadError, match="no dataset named 'v100'"):
        build_workload({**spec, "options": {"dataset": str(path), "device": "v100"}})


def test_training_rows_are_capped_per_class_seeded_and_counted():
    frame = pd.DataFrame(
        {
            "gpu_class": ["a"] * 300 + ["b"] * 50,
            "sample_id": list(range(300)) + list(range(50)),
            "status": ["ok"] * 290 + ["failed"] * 10 + ["ok"] * 50,
            "total_ms": np.arange(350, dtype=float),
        }
    )
    rows, used = training_rows(frame, 100, seed=1)
    again, _ = training_rows(frame, 100, seed=1)
    assert rows.equals(again)
    assert used == {
        "max_rows": 100,
        "per_class": {"a": {"ok_rows": 290, "used": 100}, "b": {"ok_rows": 50, "used": 50}},
    }
    assert (rows["status"] == "ok").all() and rows["sample_id"][
        rows["gpu_class"] == "a"
    ].is_monotonic_increasing
    everything, _ = training_rows(frame, None, seed=1)
    assert len(everything) == 340
    spec = parse_spec(base_spec(train={"max_rows": None}), "s.yaml")
    assert spec.train.max_rows is None
    assert parse_spec(base_spec(), "s.yaml").train.max_rows == 50_000
    with pytest.raises(UserError, match="train.max_rows"):
        parse_spec(base_spec(train={"max_rows": 5}), "s.yaml")


def test_replayed_sweep_on_three_workers_keeps_every_sample_once_through_failures_and_a_kill(
    tmp_path, write_spec
):
    path = _recorded(tmp_path / "rec.parquet")
    kills = tmp_path / "kills"
    kills.mkdir()
    options = {"dataset": str(path), "time_scale": 5.0, "fail_fraction": 0.1}
    kill = {"workers": ["cpu-1"], "after": 6, "dir": str(kills)}  # the tests' fault hook, no spec option
    spec = write_spec(workload="replay", samples=40, batch_size=4, options=options, gpu_classes=["cpu"])
    out = tmp_path / "results" / "fake"
    done = run_cli(
        "sweep", str(spec), "--workers-per-class", "3", cwd=tmp_path, timeout=400,
        env={KILL_ENV: json.dumps(kill)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (kills / "cpu-1.killed").is_file()  # the worker did die mid-sweep
    merged = pq.read_table(out / "merged").to_pandas()
    assert sorted(merged["sample_id"]) == list(range(40))
    w = RehearsalWorkload("x", "8x4", "numpy", str(path), fail_fraction=0.1)
    params = ["a.blocks", "a.threads", "b.blocks", "b.threads"]
    expect = [bool(w.fails(dict(zip(params, r, strict=True)))) for r in merged[params].to_numpy(int)]
    assert (merged["status"] == "failed").tolist() == expect
    assert any(expect)
    timing = json.loads((out / "timing.json").read_text())
    assert timing["rows"] >= 40


def test_more_local_workers_than_cores_turn_the_idle_profilers_off():
    from launchtune.pipeline.cluster.local import QUIET_WORKER_CONFIG, quiet_worker_config

    lines: list[str] = []
    assert quiet_worker_config(2, lines.append, cores=2) == {} and not lines
    config = quiet_worker_config(32, lines.append, cores=2)
    assert [config[k] for k in QUIET_WORKER_CONFIG] == [False, False, "1s", "1s", "10s", False]
    assert lines == ["32 workers on 2 cores: Dask's per-worker profiler and GIL monitor off, ticks slowed"]


def test_the_local_clusters_dask_settings_last_as_long_as_the_cluster(tmp_path, monkeypatch):
    import os

    import dask
    import distributed  # noqa: F401  (Dask reads distributed's defaults when it is imported; run alone, nothing has)

    from launchtune.pipeline.cluster import local

    monkeypatch.setattr(local, "visible_gpu_names", lambda: [])  # CPU workers, also on a GPU host
    monkeypatch.setattr(local.os, "sched_getaffinity", lambda pid: {0})  # one core: two workers are many
    malloc = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"
    keys = [*local.QUIET_WORKER_CONFIG, malloc]
    before = {k: dask.config.get(k) for k in keys}
    assert before["distributed.admin.tick.interval"] == "20ms" and before[malloc] == 65536  # Dask's own
    lines: list[str] = []
    with local.open_local_cluster(["cpu"], tmp_path, lines.append, workers_per_class=2) as handle:
        assert dask.config.get("distributed.admin.tick.interval") == "1s" and dask.config.get(malloc) is None
        on_workers = handle.client.run(
            lambda: (
                dask.config.get("distributed.worker.profile.enabled"),
                "MALLOC_TRIM_THRESHOLD_" in os.environ,
            )
        )
        assert sorted(on_workers.values()) == [(False, False), (False, False)]
    assert {k: dask.config.get(k) for k in keys} == before  # a notebook's next cluster starts from its own
    assert lines[0].startswith("2 workers on 1 cores")


def test_suggested_batch_size_pays_the_task_cost_and_keeps_every_worker_busy():
    from launchtune.pipeline.store.batching import suggest_batch_size

    # 22 ms samples, 15 ms a task: 35 samples keep the task's cost at 2% of the batch, and 44 keep the
    # scheduler of 32 workers half idle
    assert suggest_batch_size(100_000, 32, 0.022, scheduler_share=1.0) == 35
    assert suggest_batch_size(100_000, 32, 0.022) == 44
    # 1 s GPU samples: one sample per task would already do; many workers leave 8 batches each at most
    assert suggest_batch_size(10_000, 1000, 1.0) == 1
    assert suggest_batch_size(1_000, 8, 0.001) == 1_000 // 64  # balance wins over overhead
    with pytest.raises(ValueError, match="positive"):
        suggest_batch_size(10, 0, 1.0)


def test_batch_size_auto_is_timed_on_the_planning_worker_chosen_once_and_kept(tmp_path):
    from launchtune.pipeline.store.batching import auto_batch_size, suggest_batch_size
    from launchtune.pipeline.sweep.run import keep_batch_size
    from launchtune.pipeline.sweep.worker import PROBE_SAMPLES, plan_task

    path = _recorded(tmp_path / "rec.parquet")
    spec = parse_spec(
        base_spec(workload="replay", batch_size="auto", options={"dataset": str(path), "time_scale": 10.0}),
        "s.yaml",
    )
    assert spec.batch_size == "auto" and spec.planning_key()["batch_size"] == "auto"
    plan = plan_task(spec.to_dict(), ["random"], 40, 0)
    w = RehearsalWorkload("x", "8x4", "numpy", str(path))
    slept = sorted(10 * w.replay.recorded_time(c)[0] / 1000 for _, c in plan["configs"][:PROBE_SAMPLES])
    # the median sample (its sleep plus some CPU), not the fastest; the upper bound is one only a hang exceeds
    assert slept[1] <= plan["probe_s"] < slept[1] + 30
    plans = {"cpu": plan, "h100": {**plan, "probe_s": 1.0}, "v100": {**plan, "probe_s": None}}
    expect = min(suggest_batch_size(40, 3, plan["probe_s"]), suggest_batch_size(40, 1, 1.0))
    assert auto_batch_size(plans, {"cpu": 3, "h100": 1}) == expect
    assert auto_batch_size({}, {}) == 25
    lines: list[str] = []
    kept = keep_batch_size(spec, {"batch_size": 17}, False, lines.append)
    assert kept.batch_size == 17 and lines == ["batch_size auto: 17, as chosen when fake was planned"]
    assert keep_batch_size(spec, {"batch_size": 17}, True, lines.append).batch_size == "auto"  # --force
    assert keep_batch_size(spec, None, False, lines.append).batch_size == "auto"
    with pytest.raises(UserError, match="batch_size"):
        parse_spec(base_spec(batch_size="big"), "s.yaml")


def test_the_kill_hook_is_no_spec_option_but_the_tests_environment(tmp_path, monkeypatch):
    """A spec cannot make a worker write a file where it names (the hook that kills a worker leaves a marker
    file): only ``$LAUNCHTUNE_REHEARSAL_KILL``, which the tests and the scale benchmark set, turns it on."""
    path = _recorded(tmp_path / "rec.parquet")
    spec = {"workload": "replay", "case": "x", "size": "8x4", "backend": "numpy"}
    for option in ({"kill_dir": "/tmp"}, {"kill_workers": ["cpu-0"]}, {"kill_after": 1}):
        with pytest.raises(WorkloadError, match=f"unknown replay option '{next(iter(option))}'"):
            build_workload({**spec, "options": {"dataset": str(path), **option}})
    assert build_workload({**spec, "options": {"dataset": str(path)}}).kill_workers == set()
    monkeypatch.setenv(KILL_ENV, json.dumps({"workers": ["cpu-1"], "after": 3, "dir": str(tmp_path)}))
    workload = build_workload({**spec, "options": {"dataset": str(path)}})
    assert (workload.kill_workers, workload.kill_after, workload.kill_dir) == ({"cpu-1"}, 3, tmp_path)
    monkeypatch.setenv(KILL_ENV, json.dumps({"workers": ["cpu-1"], "after": 0, "dir": str(tmp_path)}))
    with pytest.raises(WorkloadError, match=f"\\${KILL_ENV}: expected"):
        build_workload({**spec, "options": {"dataset": str(path)}})


def test_a_second_cluster_on_the_machine_says_its_dashboard_port_in_one_line(tmp_path):
    """The dashboard's port taken (another sweep, a notebook's cluster): no Dask warning on stderr, and the
    dashboard line names the port the cluster got."""
    import socket
    import warnings

    from launchtune.pipeline.cluster import local

    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 8787))  # held here, unless something else on this machine already holds it
    except OSError:
        pass
    try:
        lines: list[str] = []
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with local.open_local_cluster(["cpu"], tmp_path, lines.append) as handle:
                dashboard = handle.dashboard
        assert not [w for w in seen if "already in use" in str(w.message)], [str(w.message) for w in seen]
        assert ":8787/" not in dashboard and any(line.startswith(f"dashboard: {dashboard}") for line in lines)
    finally:
        holder.close()
