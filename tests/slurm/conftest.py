"""A real single-node SLURM for the whole module: two partitions standing in for two GPU classes.

Started once per test session (about 15 s to install slurm-wlm and munge with apt-get on a fresh machine,
under a second to start) and stopped at the end. Skipped, with the reason, only where it cannot work: not
root, or no SLURM and no apt-get.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

from tests.slurm.localslurm import LocalSlurm, ensure_installed, why_impossible

REPO = Path(__file__).resolve().parents[2]
# partition name -> GPU class it stands in for (names differ on purpose: the config maps one to the other)
PARTITIONS = {"part-v100": "v100", "part-h100": "h100"}


@pytest.fixture(scope="session")
def slurm(tmp_path_factory) -> LocalSlurm:
    reason = why_impossible()
    if reason:
        pytest.skip(reason)
    ensure_installed(log=lambda msg: print(msg, file=sys.stderr))
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm"), list(PARTITIONS))
    cluster.start()
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)  # sbatch/squeue of the code under test find this SLURM
    try:
        yield cluster
    finally:
        cluster.stop()
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old


def write_cluster_config(
    path: Path,
    *,
    tls: bool = True,
    setup: list[str] | None = None,
    max_job_failures: int = 3,
    release_idle_after_s: float = 3,
) -> Path:
    """A copy of cluster_configs/slurm.yaml reduced to the two test partitions, sized for a 2-core machine."""
    config = {
        "scheduler": {
            "interface": "lo",
            "dashboard": "127.0.0.1:0",
            "tls": tls,
            "max_job_failures": max_job_failures,
            # short by default: the tests watch a finished class give its jobs back
            "release_idle_after_s": release_idle_after_s,
        },
        "defaults": {
            "gres": "gpu:1",
            "cores": 1,
            "memory": "1GiB",
            "walltime": "00:15:00",
            "python": sys.executable,
            "setup": setup
            if setup is not None
            else [
                f"export PYTHONPATH={REPO}",
                "export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1",
            ],
        },
        "classes": {cls: {"partition": part} for part, cls in PARTITIONS.items()},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture
def cluster_config(tmp_path) -> Path:
    return write_cluster_config(tmp_path / "slurm-test.yaml")
