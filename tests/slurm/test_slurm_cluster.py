"""The SLURM cluster layer against a real SLURM, driven directly through Dask (no sweep CLI).

One sweep-sized session covers: jobs per class seen in squeue, class routing by Dask resources, TLS refusing a
plain client, credentials 0600 and removed, a worker job cancelled mid-run with every task still done once,
a finished class giving its jobs back, and no job left behind.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time

import pytest
from distributed import Client
from distributed.security import Security

from launchtune.pipeline.cluster.slurm import open_slurm_cluster
from tests.slurm.conftest import PARTITIONS

pytestmark = pytest.mark.slurm


def where(i: int, seconds: float, runs: str) -> dict:
    """A task that reports which SLURM job, partition and Dask worker ran it (and leaves a mark per run)."""
    import time as _t
    from pathlib import Path as _P

    from distributed import get_worker

    _t.sleep(seconds)
    (_P(runs) / f"{i}-job{os.environ.get('SLURM_JOB_ID')}").touch()
    return {
        "i": i,
        "job": os.environ.get("SLURM_JOB_ID"),
        "partition": os.environ.get("SLURM_JOB_PARTITION"),
        "worker": get_worker().name,
    }


def active_jobs(slurm) -> list[dict]:
    return [j for j in slurm.squeue() if j["State"] in ("PENDING", "RUNNING", "CONFIGURING")]


def test_classes_tls_cancel_and_cleanup(slurm, cluster_config, tmp_path):
    lines: list[str] = []
    workdir = tmp_path / "sweep"
    with open_slurm_cluster(cluster_config, ["v100", "h100"], 1, workdir, log=lines.append) as handle:
        client = handle.client
        assert handle.kind == "slurm" and handle.gpu_classes == ["v100", "h100"]
        assert handle.facts["v100"]["partition"] == "part-v100" and handle.facts["h100"]["bandwidth_gbs"] > 0
        address = client.scheduler.address
        assert address.startswith("tls://127.0.0.1:")

        # credentials: private folder, private files, while the sweep runs
        cred_dir = workdir / "credentials"
        files = sorted(cred_dir.iterdir())
        assert files and stat.S_IMODE(cred_dir.stat().st_mode) == 0o700
        assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)

        # no job before any task needs a class
        assert active_jobs(slurm) == []

        # v100: 12 tasks of 0.5 s; h100: 4 tasks. Cancel the v100 job once it has done some.
        runs = tmp_path / "runs"
        runs.mkdir()
        v = [client.submit(where, i, 0.5, str(runs), resources={"v100": 1}, key=f"v-{i}") for i in range(12)]
        h = [client.submit(where, i, 0.3, str(runs), resources={"h100": 1}, key=f"h-{i}") for i in range(4)]

        # a plain TCP client, and a TLS client with a key of its own, are both refused
        with pytest.raises((OSError, TimeoutError)):
            Client(address.replace("tls://", "tcp://"), timeout="3s")
        with pytest.raises((OSError, TimeoutError)):
            Client(address, security=Security.temporary(), timeout="3s")  # TLS, but not this sweep's key

        first = v[2].result(timeout=120)
        victim = first["job"]
        assert victim and first["partition"] == "part-v100"
        subprocess.run(["scancel", victim], check=True, env=slurm.env)
        results_v = client.gather(v)
        results_h = client.gather(h)

        assert sorted(r["i"] for r in results_v) == list(range(12))
        assert {r["partition"] for r in results_v} == {"part-v100"}
        assert {r["partition"] for r in results_h} == {"part-h100"}
        assert all(r["worker"].startswith("v100-") for r in results_v)
        assert all(r["worker"].startswith("h100-") for r in results_h)
        # the cancelled job did run tasks; a replacement job of the same class finished the rest (and
        # recomputed results that lived only on the cancelled worker)
        assert any(p.name.endswith(f"-job{victim}") for p in runs.iterdir())
        assert {r["job"] for r in results_v} - {victim}
        seen = {j["JobID"]: j for j in slurm.squeue()}
        assert seen[victim]["State"] == "CANCELLED"
        assert {seen[r["job"]]["Partition"] for r in results_v + results_h} == set(PARTITIONS)

        # a class with nothing left to do gives its jobs back (once nobody holds results that live only there)
        del v, h
        deadline = time.monotonic() + 30
        while active_jobs(slurm) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert active_jobs(slurm) == []
        assert any("no work left" in line for line in lines), lines
    assert not (workdir / "credentials").exists()
    assert active_jobs(slurm) == []
    assert (workdir / "cluster-usage.json").is_file()
