"""Every wait has an end the user is told about: a wait whose workers all died (the local cluster does not
bring them back) ends ``GONE_S`` later with one line, exit 1, not at the hour's limit in silence; a wait
whose workers are there runs to its limit as before."""

from __future__ import annotations

import time

import pytest

from launchtune.pipeline.cluster import waits
from launchtune.pipeline.cluster.waits import ClusterFailure, ClusterTimeout, result


class _Never:
    """A Dask future whose task never finishes (its worker is gone)."""

    cancelled = False

    def result(self, timeout=None):
        time.sleep(timeout or 0)
        raise TimeoutError

    def cancel(self):
        self.cancelled = True


class _Done:
    def result(self, timeout=None):
        return {"candidates": []}


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(waits, "POLL_S", 0.02)
    monkeypatch.setattr(waits, "GONE_S", 0.1)


def test_a_wait_whose_workers_are_all_gone_ends_with_one_line(quick):
    future = _Never()
    looked = []
    with pytest.raises(ClusterFailure) as info:
        result(
            future,
            "the re-measurement of class cpu's predicted best",
            3600.0,
            lambda: looked.append(1) and False,
        )
    line = str(info.value)
    assert line.startswith("the re-measurement of class cpu's predicted best: every worker that could run it")
    assert "\n" not in line and info.value.exit_code == 1 and future.cancelled and len(looked) >= 2
    assert not isinstance(info.value, ClusterTimeout)


def test_a_wait_with_live_workers_runs_to_its_limit_and_a_finished_one_returns(quick):
    future = _Never()
    with pytest.raises(ClusterTimeout, match="timed out: the plan of class cpu"):
        result(future, "the plan of class cpu", 0.3, lambda: True)
    assert future.cancelled
    assert result(_Done(), "x", 1.0, lambda: False) == {"candidates": []}
    with pytest.raises(ClusterTimeout):  # without ``alive`` (SLURM: a job may wait in the queue) as before
        result(_Never(), "x", 0.2)
