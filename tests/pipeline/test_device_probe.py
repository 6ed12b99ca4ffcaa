"""The device facts a worker records with each row: the copy bandwidth measured where the workload measures
on the device, not for recorded answers (``Capabilities.recorded``: the replay), whose host is no device."""

from __future__ import annotations

import pytest

from launchtune.pipeline.sweep import worker
from launchtune.pipeline.sweep.rehearsal import RehearsalWorkload
from tests.pipeline.conftest import FAKE, base_spec
from tests.pipeline.test_live_search import NOISE, _recorded


@pytest.fixture
def probes(monkeypatch):
    """Fresh caches, and the bandwidth probe counted (answering 12.5 GB/s)."""
    calls = []
    monkeypatch.setattr(worker, "_CACHE", {})
    monkeypatch.setattr(worker, "_FACTS", {})
    monkeypatch.setattr(worker, "_BANDWIDTH", {})
    monkeypatch.setattr(worker, "_LAST_KEY", [None, ""])
    monkeypatch.setattr(worker, "measure_copy_bandwidth", lambda backend: calls.append(backend) or 12.5)
    return calls


def test_a_replay_records_no_copy_bandwidth_and_a_measuring_workload_does(tmp_path, probes):
    assert RehearsalWorkload.capabilities.recorded
    data = _recorded(tmp_path / "rec.parquet")
    replay = {"workload": "replay", "case": "x", "size": "8x4", "backend": "numpy"}
    replay["options"] = {"dataset": str(data), "seed": NOISE, "time_scale": 0.0}
    _, facts = worker.get_workload(replay)
    assert facts["measured_bandwidth_gbs"] is None and not probes  # not probed at all
    assert facts["device_name"]  # the other facts are still read
    fake = {**base_spec(), "options": {}}
    assert fake["workload"] == FAKE
    _, facts = worker.get_workload(fake)
    assert facts["measured_bandwidth_gbs"] == 12.5 and len(probes) == 1
    _, again = worker.get_workload({**fake, "case": "other"})  # measured once per process and device
    assert again["measured_bandwidth_gbs"] == 12.5 and len(probes) == 1
