"""The local cluster authenticates like the SLURM one (issue 14: any user of the machine could connect a plain
``Client`` to its 127.0.0.1 port and run code on the workers): a client without the sweep's key is refused."""

from __future__ import annotations

import gc
import re

import pytest
from distributed import Client
from distributed.security import Security

from launchtune.pipeline.cluster import open_cluster
from launchtune.pipeline.store.folder import SweepFolder
from tests.pipeline.conftest import FAKE, run_cli


def _refused(address: str) -> None:
    """A plain TCP client, and a TLS client with a key pair of its own, are both refused at once."""
    assert address.startswith("tls://127.0.0.1:")
    with pytest.raises((OSError, TimeoutError)):
        Client(address.replace("tls://", "tcp://"), timeout="3s")
    with pytest.raises((OSError, TimeoutError)):
        Client(address, security=Security.temporary(), timeout="3s")


def _plus_one(x: int) -> int:
    return x + 1


def test_only_a_client_with_the_clusters_key_gets_in(tmp_path):
    folder = SweepFolder(tmp_path / "sweep")
    lines: list[str] = []
    with open_cluster("local", ["cpu"], 1, folder.dask_dir, lines.append) as handle:  # as run_sweep does
        address = handle.client.scheduler.address
        _refused(address)
        with Client(address, security=handle.client.security, timeout="60s") as own:
            assert own.submit(_plus_one, 1, resources={"cpu": 1}).result(timeout=120) == 2
        assert handle.dashboard.startswith("http://127.0.0.1:")  # the dashboard stays on loopback
        assert f"scheduler {address} (TLS" in "\n".join(lines)
        # no gc callback of distributed's in this process: an interrupt raised inside one would be lost
        hooks = [type(getattr(cb, "__self__", None)).__name__ for cb in gc.callbacks]
        assert "GCDiagnosis" not in hooks, hooks
    # the key pair lived in memory: nothing of it in the sweep folder
    assert not any(p.suffix == ".pem" or "credentials" in p.name for p in folder.path.rglob("*"))


def test_a_running_sweep_refuses_clients_without_its_key(tmp_path, write_spec):
    """During a real ``launchtune sweep`` (its fake workload allowed by the flag)."""
    spec = write_spec(samples=20, batch_size=5, options={"delay": 0.1}, validate={"pool": 20, "top_k": 1})
    out = tmp_path / "out"
    # two workers: one device would be measured in the sweep's own process, with no cluster to attack
    args = ("sweep", str(spec), "--out", str(out), "--allow-workload", FAKE, "--workers-per-class", "2")
    proc = run_cli(*args, cwd=tmp_path, background=True, allow_fake=False)
    try:
        address = None
        for line in proc.stdout:
            m = re.search(r"local cluster: .*; scheduler (tls://\S+) \(TLS", line)
            if m:
                address = m.group(1)
                break
        assert address, "the sweep printed no scheduler line"
        _refused(address)
        rest, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, err  # the refused clients did the sweep no harm
    assert "measured 20 configurations" in rest
