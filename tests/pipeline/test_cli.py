"""End-to-end tests through the real CLI (``launchtune ...`` in a subprocess) on the CPU."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from launchtune.kernels.tuning_table import TuningTable
from launchtune.pipeline.store.folder import SweepFolder
from launchtune.pipeline.store.schema import FIXED_FIELDS
from tests.pipeline.conftest import base_spec, one_line_error, run_cli, run_cli_here

REPORT_KEYS = {
    "samples",
    "ok",
    "invalid",
    "failed",
    "r2_train",
    "r2_test",
    "mse_test",
    "predicted_best_config",
    "predicted_best_measured_ms",
    "default_measured_ms",
    "best_sampled_ms",
    "speedup_over_default",
}


def _ok(result):
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    return result


def _shards(out: Path, cls: str = "cpu") -> dict[str, float]:
    return {p.name: p.stat().st_mtime_ns for p in sorted((out / f"shards/gpu_class={cls}").glob("*.parquet"))}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One fake sweep run through the CLI, shared by the tests that inspect, rerun or tamper with it."""
    tmp = tmp_path_factory.mktemp("sweep")
    spec = tmp / "spec.yaml"
    spec.write_text(yaml.safe_dump(base_spec(samples=30, samplers=["random", "per_kernel_exhaustive"])))
    out = tmp / "out"
    result = _ok(run_cli("sweep", str(spec), "--out", str(out), cwd=tmp))
    return spec, out, result


@pytest.mark.slow
def test_sweep_end_to_end_then_rerun_then_per_class_rerun(finished):
    spec, out, result = finished
    tmp_path = out.parent
    # one CPU worker: measured in the sweep's own process, no Dask cluster started (cluster.inline)
    assert "measuring in this process, without a Dask cluster" in result.stdout
    assert "dashboard" not in result.stdout and "local cluster:" not in result.stdout
    assert re.search(r"done in [\d.]+ s: planning [\d.]+ s, compiling [\d.]+ s, measuring", result.stdout)
    assert set(json.loads((out / "timing.json").read_text())["stages"]) >= {
        "planning_s",
        "measuring_s",
        "rest_s",
    }

    # shards: 30 random + each kernel's grid with the other at its default, in batches of 10
    plan = SweepFolder(out).read_plan("cpu")
    n = len(plan["configs"])
    assert n > 30 and json.loads((out / "plan/cpu.json").read_text())["n_configs"] == n
    assert pq.read_table(out / "plan/cpu.configs.parquet").num_rows == n  # not a JSON list of dicts
    shards = _shards(out)
    assert len(shards) == -(-n // 10)
    table = pq.read_table(out / "shards/gpu_class=cpu/shard-00000.parquet")
    assert table.schema.names[: len(FIXED_FIELDS)] == [f.name for f in FIXED_FIELDS]
    assert {"a.blocks", "a.threads", "b.blocks", "b.threads", "ms.a", "ms.b"} <= set(table.schema.names)
    assert table.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")

    merged = pq.read_table(out / "merged", partitioning="hive").to_pandas()
    assert len(merged) == n and merged["sample_id"].is_unique
    assert set(merged["status"]) == {"ok", "invalid", "failed"}  # the fake workload makes all three
    per_kernel = merged[merged["sampler"] == "per_kernel_exhaustive"]
    assert len(per_kernel) == (4 * 3 - 1) + 3 * 2  # blocks 8 x threads 128 breaks the constraint
    assert (per_kernel["status"] == "ok").sum() > len(per_kernel) / 2
    assert not per_kernel["reason"].str.contains("is not one of").any()
    failed = merged[merged["status"] == "failed"]
    assert failed["reason"].str.contains("simulated launch failure").all() and failed["total_ms"].isna().all()
    assert (merged["seed"] == 0).all() and (merged["device_class"] == "cpu").all()
    assert json.loads(merged["versions"].iloc[0])["python"]

    for group in ("cpu", "combined"):
        assert (out / f"models/{group}/mlp.skops").is_file()
    report = json.loads((out / "report.json").read_text())
    cls = report["classes"]["cpu"]
    assert REPORT_KEYS <= set(cls)
    assert cls["samples"] == n and cls["ok"] + cls["invalid"] + cls["failed"] == n
    assert cls["predicted_best_measured_ms"] > 0 and cls["default_measured_ms"] > 0
    # the fake workload's best is a.blocks=4, a.threads=64, b.blocks=2, b.threads=64; the additive model
    # finds it
    assert report["classes"]["cpu"]["models"]["additive"]["r2_test"] > 0.9
    assert cls["predicted_best_config"] == {"a.blocks": 4, "a.threads": 64, "b.blocks": 2, "b.threads": 64}
    assert cls["speedup_over_default"] > 1.2
    assert {p.name for p in (out / "figures").iterdir()} >= {"cpu-pred-vs-actual.png", "cpu-loss.png"}
    table = json.loads((out / "tuning_table.json").read_text())
    entry = table["entries"][0]
    assert table["format"] == "launchtune-tuning-table" and entry["gpu_class"] == "cpu"
    tuned = TuningTable.load(out / "tuning_table.json")  # what the runtime autotuner reads
    assert {e.kernel for e in tuned.entries} == {"a", "b"}
    assert next(e for e in tuned.entries if e.kernel == "a").params[0] == (4, 64)
    assert entry["best"] == cls["predicted_best_config"] and set(entry["per_kernel"]) == {"a", "b"}
    assert (out / "report.md").read_text().startswith("# Sweep `fake`")

    # rerun: every shard is finished, so none is measured again
    result = _ok(run_cli("sweep", str(spec), "--out", str(out), cwd=tmp_path))
    assert f"{len(shards)} finished shard(s) kept; 0 batch(es) to measure" in result.stdout
    assert _shards(out) == shards

    # a second class's partition (as if measured elsewhere) survives a forced rerun of the cpu partition
    other = out / "shards/gpu_class=v100"
    other.mkdir()
    for path in (out / "shards/gpu_class=cpu").glob("*.parquet"):
        t = pq.read_table(path)
        t = t.set_column(t.schema.get_field_index("gpu_class"), "gpu_class", pa.array(["v100"] * t.num_rows))
        pq.write_table(t, other / path.name)
    (out / "plan/v100.json").write_bytes((out / "plan/cpu.json").read_bytes())  # its plan, as if planned
    v100 = _shards(out, "v100")
    result = _ok(
        run_cli("sweep", str(spec), "--out", str(out), "--gpu-class", "cpu", "--force", cwd=tmp_path)
    )
    assert _shards(out, "v100") == v100
    redone = _shards(out)
    assert set(redone) == set(shards) and all(redone[k] != shards[k] for k in shards)
    merged = pq.read_table(out / "merged", partitioning="hive").to_pandas()
    assert sorted(merged["gpu_class"].astype(str).unique()) == ["cpu", "v100"] and len(merged) == 2 * n


@pytest.mark.slow
def test_killing_a_worker_mid_sweep_loses_and_doubles_nothing(tmp_path, write_spec):
    pids = tmp_path / "pids"
    spec = write_spec(samples=60, batch_size=5, options={"delay": 0.08, "pid_dir": str(pids)})
    out = tmp_path / "out"
    # two workers: with one device the sweep measures in its own process, and there is no worker to lose
    args = ("sweep", str(spec), "--out", str(out), "--workers-per-class", "2")
    proc = run_cli(*args, cwd=tmp_path, background=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not (pids.is_dir() and len(_shards(out)) >= 2):
            time.sleep(0.1)
        victims = sorted(int(p.stem) for p in pids.glob("*.pid"))
        assert len(victims) == 2, "expected two worker processes, one to kill"
        os.kill(victims[0], signal.SIGKILL)  # the worker process this test's sweep started
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, (stdout[-2000:], stderr[-3000:])
    assert len(list(pids.glob("*.pid"))) == 3  # the nanny started a fresh worker
    assert len(_shards(out)) == 12
    assert not list(out.glob("shards/**/*.tmp"))
    merged = pq.read_table(out / "merged", partitioning="hive").to_pandas()
    assert sorted(merged["sample_id"]) == list(range(60))
    assert sorted(merged["batch"].unique()) == [f"{b:05d}" for b in range(12)]


@pytest.mark.slow
def test_real_cfd_workload_runs_through_the_cli(tmp_path):
    spec = tmp_path / "cfd.yaml"
    spec.write_text(
        "name: cfd_tiny\nworkload: cfd\ncase: inlet\nsize: 64x24\nbackend: numpy\nsamples: 12\nrepeats: 1\n"
        "batch_size: 6\nvalidate: {pool: 50, top_k: 1, repeats: 1}\n"
        "train: {hidden_layers: [8], max_epochs: 10}\n"
    )
    result = _ok(run_cli("sweep", str(spec), cwd=tmp_path))
    out = tmp_path / "results/cfd_tiny"
    assert "report:" in result.stdout
    merged = pq.read_table(out / "merged", partitioning="hive").to_pandas()
    assert len(merged) == 12 and (merged["status"] == "ok").all() and merged["verified"].all()
    kernels = ["xi_limiter", "eta_limiter", "xi_flux", "eta_flux", "source", "rhs", "update"]
    assert (merged[[f"ms.{k}" for k in kernels]] > 0).all().all()
    report = json.loads((out / "report.json").read_text())
    assert REPORT_KEYS <= set(report["classes"]["cpu"])


def test_malformed_yaml(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nworkload: [cfd\n")
    line = one_line_error(run_cli_here("sweep", str(bad), cwd=tmp_path))
    assert str(bad) in line and "malformed YAML" in line


def test_unknown_gpu_class(tmp_path, write_spec):
    line = one_line_error(run_cli_here("sweep", str(write_spec()), "--gpu-class", "h900", cwd=tmp_path))
    assert "unknown GPU class 'h900'" in line
    assert not (tmp_path / "results").exists()
    spec = write_spec("classes.yaml", gpu_classes=["h100", "h900"])
    line = one_line_error(run_cli_here("sweep", str(spec), cwd=tmp_path))
    assert "classes.yaml: gpu_classes: unknown GPU class 'h900'" in line
    assert not (tmp_path / "results").exists()


def test_a_site_class_of_the_slurm_config_is_known_and_a_missing_config_is_one_line(tmp_path, write_spec):
    from launchtune.pipeline.cluster import known_gpu_classes

    site = tmp_path / "site.yaml"
    site.write_text(
        "classes:\n  l40s:\n    partition: ada\n"
        "    device: {peak_fp64_gflops: 1414, bandwidth_gbs: 864, memory_gb: 48}\n"
    )
    assert "l40s" in known_gpu_classes(str(site)) and "l40s" not in known_gpu_classes("local")
    line = one_line_error(run_cli_here("sweep", str(write_spec()), "--cluster", "nonsense", cwd=tmp_path))
    assert "--cluster: nonsense: no such cluster config" in line and not (tmp_path / "results").exists()


def test_zero_samples_with_nothing_else_to_measure_is_refused_up_front(tmp_path, write_spec):
    line = one_line_error(run_cli_here("sweep", str(write_spec()), "--samples", "0", cwd=tmp_path))
    assert line == "error: --samples: 0 random samples and no exhaustive sampler: nothing to measure"
    assert not (tmp_path / "results").exists()


def test_gpu_class_the_local_cluster_does_not_serve(tmp_path, write_spec):
    line = one_line_error(run_cli_here("sweep", str(write_spec()), "--gpu-class", "a100", cwd=tmp_path))
    assert "'a100' is not served by the local cluster" in line
    assert not (tmp_path / "results").exists()  # refused before the sweep folder or a cluster was made


def test_spec_output_outside_results_folder(tmp_path, write_spec):
    line = one_line_error(run_cli_here("sweep", str(write_spec(output="../../../tmp/x")), cwd=tmp_path))
    assert "outside the results folder" in line and "output" in line
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("command", ["merge", "train", "report"])
def test_empty_results_folder(tmp_path, command):
    empty = tmp_path / "empty"
    empty.mkdir()
    line = one_line_error(run_cli_here(command, str(empty), cwd=tmp_path))
    assert str(empty) in line


@pytest.mark.slow
def test_report_refuses_a_crafted_model_file(tmp_path, finished):
    """A finished sweep folder whose model file was swapped for one with an untrusted type."""
    import skops.io as sio

    from tests.pipeline.test_units import Payload

    dst = tmp_path / "sweep"
    shutil.copytree(finished[1], dst, ignore=shutil.ignore_patterns(".dask"))
    sio.dump({"model": Payload()}, dst / "models/cpu/mlp.skops")
    line = one_line_error(run_cli_here("report", str(dst), cwd=tmp_path))
    assert "refused to load a model file with untrusted types" in line


def test_help_answers(tmp_path):
    for command in ("sweep", "merge", "train", "report"):
        result = _ok(run_cli_here(command, "--help", cwd=tmp_path))
        assert "usage:" in result.stdout
    assert "--gpu-class" in run_cli_here("sweep", "--help", cwd=tmp_path).stdout


@pytest.mark.slow
def test_time_limit_measures_batches_in_plan_order_and_a_rerun_finishes(tmp_path, write_spec):
    spec = write_spec(
        samples=60, batch_size=5, samplers=["random", "per_kernel_exhaustive"], options={"delay": 0.05}
    )
    out = tmp_path / "out"
    result = _ok(run_cli("sweep", str(spec), "--out", str(out), "--max-minutes", "0.05", cwd=tmp_path))
    assert "time limit of 0.05 min reached" in result.stdout
    # 60 random (batches 0-11), then 17 per-kernel configurations (batches 12-15) that go first
    order = [f"shard-{b:05d}.parquet" for b in [12, 13, 14, 15, *range(12)]]
    done = sorted(_shards(out), key=order.index)
    assert 0 < len(done) < len(order) and done == order[: len(done)]
    _ok(run_cli("sweep", str(spec), "--out", str(out), cwd=tmp_path))
    merged = pq.read_table(out / "merged", partitioning="hive").to_pandas()
    assert sorted(merged["sample_id"]) == list(range(77))
