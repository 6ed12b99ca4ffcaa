"""The real CLI sweep through a real SLURM: two partitions standing in for two GPU classes, numpy backend.

One sweep (CFD inlet, small grid) is watched while it runs: its scheduler refuses a plain client and a client
with a TLS key of its own, its credentials are private, and one v100 worker job is cancelled mid-sweep. After
it: every batch is in exactly one shard, written by jobs of its class's partition (rows record
slurm_partition and slurm_job_id), jobs are gone, credentials are gone. Then a per-class rerun
(``--gpu-class h100 --force``) re-measures only h100, on new h100 jobs.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from distributed import Client
from distributed.security import Security

from tests.slurm.conftest import PARTITIONS, REPO

pytestmark = pytest.mark.slurm

SAMPLES, BATCH = 60, 10  # per class: 6 batches each


def write_spec(path: Path) -> Path:
    spec = {
        "name": "slurm-it",
        "workload": "cfd",
        "case": "inlet",
        "size": "52x16",
        "backend": "numpy",
        "options": {"space": "paper"},
        "gpu_classes": list(PARTITIONS.values()),
        "samples": SAMPLES,
        "samplers": ["random"],
        "repeats": 2,
        "batch_size": BATCH,
        "seed": 3,
        "validate": {"pool": 200, "top_k": 1, "repeats": 1},
        "train": {"hidden_layers": [8], "max_epochs": 20},
    }
    path.write_text(yaml.safe_dump(spec))
    return path


class Sweep:
    """``launchtune sweep`` in the background, its output collected line by line."""

    def __init__(self, *args: str, cwd: Path):
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        self.started = time.time()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "launchtune", "sweep", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, needle: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if needle in line:
                    return line
            if self.proc.poll() is not None and needle not in "\n".join(self.lines):
                self._reader.join(5)
                raise AssertionError(
                    f"sweep exited {self.proc.returncode} before {needle!r}:\n" + self.tail()
                )
            time.sleep(0.1)
        raise AssertionError(f"no {needle!r} after {timeout} s:\n" + self.tail())

    def finish(self, timeout: float = 240) -> int:
        rc = self.proc.wait(timeout=timeout)
        self._reader.join(10)
        return rc

    def tail(self, n: int = 60) -> str:
        keep = [line for line in self.lines if " - distributed." not in line and not line.startswith(" ")]
        return "\n".join(keep[-n:])


def shard_rows(out: Path, cls: str) -> list[dict]:
    rows = []
    for path in sorted((out / "shards" / f"gpu_class={cls}").glob("shard-*.parquet")):
        for row in pq.read_table(
            path, columns=["sample_id", "batch", "slurm_partition", "slurm_job_id", "worker", "gpu_class"]
        ).to_pylist():
            rows.append({**row, "shard": path.name})
    return rows


def running_job(slurm, partition: str) -> str | None:
    for job in slurm.squeue():
        if job["Partition"] == partition and job["State"] == "RUNNING":
            return job["JobID"]
    return None


def test_cli_sweep_through_slurm_with_cancel_tls_and_rerun(slurm, cluster_config, tmp_path):
    spec = write_spec(tmp_path / "spec.yaml")
    out = tmp_path / "out"
    part_of = {cls: part for part, cls in PARTITIONS.items()}
    sweep = Sweep(str(spec), "--cluster", str(cluster_config), "--out", str(out), cwd=tmp_path)
    try:
        line = sweep.wait_for("slurm: scheduler tls://")
        address = line.split("scheduler ", 1)[1].split()[0]
        # credentials exist, private, while the sweep runs
        cred_dir = out / ".dask" / "credentials"
        cred_files = sorted(cred_dir.iterdir())
        assert cred_files and stat.S_IMODE(cred_dir.stat().st_mode) == 0o700
        assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in cred_files)
        # nobody without this sweep's key gets in: plain TCP, or TLS with a key of one's own
        with pytest.raises((OSError, TimeoutError)):
            Client(address.replace("tls://", "tcp://"), timeout="3s")
        with pytest.raises((OSError, TimeoutError)):
            Client(address, security=Security.temporary(), timeout="3s")

        # cancel a v100 worker job once v100 has written its first shard (more of its batches to come)
        v100_dir = out / "shards" / "gpu_class=v100"
        deadline = time.monotonic() + 180
        while not list(v100_dir.glob("shard-*.parquet")) and time.monotonic() < deadline:
            assert sweep.proc.poll() is None, sweep.tail()
            time.sleep(0.1)
        victim = running_job(slurm, part_of["v100"])
        assert victim, slurm.squeue()
        done_before = len(list(v100_dir.glob("shard-*.parquet")))
        subprocess.run(["scancel", victim], check=True, env=slurm.env)
        assert sweep.finish() == 0, sweep.tail()
    finally:
        if sweep.proc.poll() is None:
            sweep.proc.terminate()
            sweep.proc.wait(30)
    assert done_before < SAMPLES // BATCH, "the cancel came after v100 had finished: not mid-sweep"
    # the cluster noticed (from squeue, or from the scheduler losing the worker first)
    assert re.search(rf"job {victim} (ended \(CANCELLED\)|lost its worker)", "\n".join(sweep.lines)), (
        sweep.tail()
    )

    jobs = {j["JobID"]: j for j in slurm.squeue()}
    assert jobs[victim]["State"] == "CANCELLED"
    first_jobs = {}
    for cls, part in part_of.items():
        rows = shard_rows(out, cls)
        # every sample exactly once, every batch in exactly one shard
        assert sorted(r["sample_id"] for r in rows) == list(range(SAMPLES)), cls
        assert len({r["shard"] for r in rows}) == SAMPLES // BATCH
        assert all(r["shard"] == f"shard-{r['batch']}.parquet" for r in rows)
        # written by workers of this class's partition, in jobs SLURM ran in that partition
        assert {r["slurm_partition"] for r in rows} == {part}
        assert all(r["worker"].startswith(f"{cls}-") for r in rows)
        assert all(jobs[r["slurm_job_id"]]["Partition"] == part for r in rows)
        first_jobs[cls] = {r["slurm_job_id"] for r in rows}
    # the cancelled job's batches were finished by a replacement v100 job
    assert first_jobs["v100"] - {victim}
    assert not cred_dir.exists(), "credentials must be removed when the sweep ends"
    assert not [j for j in slurm.squeue() if j["State"] in ("PENDING", "RUNNING")]
    assert (out / "report.md").is_file()

    # per-class rerun: only h100 is re-measured, on new h100 jobs; v100 shards stay as they were
    v100_before = {p.name: p.stat().st_mtime_ns for p in v100_dir.glob("shard-*.parquet")}
    known = set(jobs)
    rerun = Sweep(
        str(spec),
        "--cluster",
        str(cluster_config),
        "--out",
        str(out),
        "--gpu-class",
        "h100",
        "--force",
        cwd=tmp_path,
    )
    assert rerun.finish() == 0, rerun.tail()
    new_jobs = {j["JobID"]: j for j in slurm.squeue() if j["JobID"] not in known}
    assert new_jobs and {j["Partition"] for j in new_jobs.values()} == {part_of["h100"]}
    rows = shard_rows(out, "h100")
    assert sorted(r["sample_id"] for r in rows) == list(range(SAMPLES))
    assert {r["slurm_job_id"] for r in rows} <= set(new_jobs)
    assert {p.name: p.stat().st_mtime_ns for p in v100_dir.glob("shard-*.parquet")} == v100_before
