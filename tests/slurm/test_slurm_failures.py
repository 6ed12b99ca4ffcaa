"""An interrupted sweep, or one whose jobs cannot start a worker, leaves no job and no credentials behind."""

from __future__ import annotations

import signal

import pytest
import yaml

from tests.slurm.conftest import write_cluster_config
from tests.slurm.test_slurm_sweep import Sweep, write_spec

pytestmark = pytest.mark.slurm


def active(slurm) -> list[dict]:
    return [j for j in slurm.squeue() if j["State"] in ("PENDING", "RUNNING", "CONFIGURING")]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_sweep_cancels_its_jobs_and_removes_credentials(slurm, cluster_config, tmp_path, signum):
    out = tmp_path / "out"
    sweep = Sweep(
        str(write_spec(tmp_path / "spec.yaml")),
        "--cluster",
        str(cluster_config),
        "--out",
        str(out),
        cwd=tmp_path,
    )
    try:
        sweep.wait_for("slurm: worker ")  # a job is running and its worker connected
        assert active(slurm)
        sweep.proc.send_signal(signum)
        rc = sweep.finish(timeout=90)
    finally:
        if sweep.proc.poll() is None:
            sweep.proc.kill()
    assert rc == 130, sweep.tail()  # the CLI's answer to an interruption
    assert active(slurm) == [], slurm.squeue()
    assert not (out / ".dask" / "credentials").exists()


def test_jobs_that_cannot_start_a_worker_stop_the_sweep_with_the_log(slurm, tmp_path):
    config = write_cluster_config(tmp_path / "broken.yaml", setup=["exit 3"], max_job_failures=2)
    out = tmp_path / "out"
    sweep = Sweep(
        str(write_spec(tmp_path / "spec.yaml")), "--cluster", str(config), "--out", str(out), cwd=tmp_path
    )
    try:
        rc = sweep.finish(timeout=120)
    finally:
        if sweep.proc.poll() is None:
            sweep.proc.kill()
    assert rc == 2, sweep.tail()
    error = [line for line in sweep.lines if line.startswith("error: ")]
    assert len(error) == 1, sweep.tail()
    assert "broken.yaml: classes." in error[0] and "jobs ended before their Dask worker connected" in error[0]
    log_file = error[0].rsplit("log: ", 1)[1].strip()
    assert log_file.endswith(".err") and (tmp_path / "out" / ".dask" / "slurm-logs").is_dir()
    assert active(slurm) == []
    assert not (out / ".dask" / "credentials").exists()


@pytest.mark.parametrize(
    "edit,field",
    [
        (lambda c: c["classes"]["v100"].update(partition="no-such-partition"), "classes.v100.partition"),
        (lambda c: c["scheduler"].update(interface="nosuch0"), "scheduler.interface"),
    ],
)
def test_site_mismatch_is_one_line_before_anything_is_submitted(slurm, cluster_config, tmp_path, edit, field):
    config = yaml.safe_load(cluster_config.read_text())
    edit(config)
    cluster_config.write_text(yaml.safe_dump(config))
    known = {j["JobID"] for j in slurm.squeue()}
    out = tmp_path / "out"
    sweep = Sweep(
        str(write_spec(tmp_path / "spec.yaml")),
        "--cluster",
        str(cluster_config),
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert sweep.finish(timeout=60) == 2, sweep.tail()
    errors = [line for line in sweep.lines if line.startswith("error: ")]
    assert len(errors) == 1 and f"slurm-test.yaml: {field}" in errors[0], sweep.tail()
    assert {j["JobID"] for j in slurm.squeue()} == known
    assert not (out / ".dask" / "credentials").exists()


def test_a_job_slurm_cannot_place_is_reported_with_its_reason(slurm, cluster_config, tmp_path):
    config = yaml.safe_load(cluster_config.read_text())
    config["defaults"]["cores"] = 64  # more CPUs than the node has: the job waits forever
    cluster_config.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    sweep = Sweep(
        str(write_spec(tmp_path / "spec.yaml")),
        "--cluster",
        str(cluster_config),
        "--out",
        str(out),
        cwd=tmp_path,
    )
    try:
        line = sweep.wait_for(" pending (", timeout=60)
        assert line.startswith("slurm: v100: job ")
        sweep.proc.send_signal(signal.SIGINT)
        assert sweep.finish(timeout=60) == 130, sweep.tail()
    finally:
        if sweep.proc.poll() is None:
            sweep.proc.kill()
    assert active(slurm) == []
