"""Every wait has an end the user is told about: a wait whose workers all died (the local cluster does not
bring them back) ends ``GONE_S`` (or ``$LAUNCHTUNE_GONE_S``) later with one line, exit 1, not at the hour's
limit in silence; a wait whose workers are there runs to its limit as before."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pyarrow.parquet as pq
import pytest

from launchtune.pipeline.cluster import waits
from launchtune.pipeline.cluster.waits import ClusterFailure, ClusterTimeout, result
from launchtune.pipeline.errors import UserError
from tests.pipeline.conftest import run_cli


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


def test_launchtune_gone_s_sets_how_long_the_workers_may_be_gone(monkeypatch):
    """``$LAUNCHTUNE_GONE_S`` (seconds) replaces ``GONE_S`` for a wait; unset or empty, ``GONE_S`` holds; a
    value that is no number of seconds > 0 is one line naming the variable."""
    monkeypatch.setattr(waits, "POLL_S", 0.02)
    monkeypatch.delenv("LAUNCHTUNE_GONE_S", raising=False)
    assert waits.gone_limit() == waits.GONE_S == 30.0
    monkeypatch.setenv("LAUNCHTUNE_GONE_S", "")
    assert waits.gone_limit() == 30.0
    monkeypatch.setenv("LAUNCHTUNE_GONE_S", "0.15")
    assert waits.gone_limit() == 0.15
    with pytest.raises(ClusterFailure, match=r"none was restarted within 0\.15 s; what was measured is kept"):
        result(_Never(), "the plan of class cpu", 3600.0, lambda: False)
    for bad in ("soon", "0", "-1", "nan", "1e300"):
        monkeypatch.setenv("LAUNCHTUNE_GONE_S", bad)
        with pytest.raises(UserError, match=r"^\$LAUNCHTUNE_GONE_S: must be a number of seconds > 0"):
            waits.gone_limit()


def test_a_wait_with_live_workers_runs_to_its_limit_and_a_finished_one_returns(quick):
    future = _Never()
    with pytest.raises(ClusterTimeout, match="timed out: the plan of class cpu"):
        result(future, "the plan of class cpu", 0.3, lambda: True)
    assert future.cancelled
    assert result(_Done(), "x", 1.0, lambda: False) == {"candidates": []}
    with pytest.raises(ClusterTimeout):  # without ``alive`` (SLURM: a job may wait in the queue) as before
        result(_Never(), "x", 0.2)


def _kill_workers(pid: int, stop: threading.Event, killed: list[int]) -> None:
    """Kill every Dask worker process of the sweep ``pid`` (``multiprocessing.spawn`` children), and each
    one its Nanny starts in its place, until ``stop``: a class whose card takes down every process. The
    test's own hand; nothing a spec or flag can reach. ``killed`` gets their pids."""
    import psutil

    while not stop.is_set():
        try:
            children = psutil.Process(pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for child in children:
            try:
                if "spawn_main" in " ".join(child.cmdline()):
                    child.kill()
                    killed.append(child.pid)
            except psutil.NoSuchProcess:
                pass
        stop.wait(0.05)


def test_the_last_local_worker_killed_during_the_re_measure_ends_the_sweep_with_one_line(
    tmp_path, write_spec
):
    """End to end (issue 43): the sweep waited in silence for the hour's limit; it ends ``$LAUNCHTUNE_GONE_S``
    (here 5 s, the default 30) after its last worker is gone, with one line naming the re-measurement and the
    seconds it gave the workers, exit 1, and keeps what it measured."""
    spec = write_spec(samples=20, batch_size=10, options={"delay": 0.2})  # the re-measure takes ~15 s
    out = tmp_path / "out"
    gone_s = 5
    env = {"PYTHONWARNINGS": "ignore:Port:UserWarning", "LAUNCHTUNE_GONE_S": str(gone_s)}
    proc = run_cli(  # two workers: one device would measure in the sweep's own process, with none to kill
        "sweep", str(spec), "--out", str(out), "--workers-per-class", "2", cwd=tmp_path, env=env,
        background=True, new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # the models are trained: what follows is the re-measure
        seen.append(line)
        if line.startswith("train combined:"):
            break
    else:
        raise AssertionError("".join(seen)[-2000:] + proc.stderr.read()[-2000:])
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_workers, args=(proc.pid, stop, killed), daemon=True)
    killer.start()
    try:
        rest, err = proc.communicate(timeout=gone_s + 120)  # only a wait without an end takes this long
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"the sweep still waits {gone_s + 120} s after its workers died") from None
    finally:
        stop.set()
        killer.join()
    lines = [line for line in err.splitlines() if line.strip()]
    assert killed and proc.returncode == 1 and len(lines) == 1, (proc.returncode, rest[-2000:], err[-3000:])
    assert lines[0].startswith(
        "error: the re-measurement of class cpu's predicted best: every worker that could run it died and "
        f"none was restarted within {gone_s} s;"
    ), lines[0]
    assert sum(pq.read_table(s).num_rows for s in (out / "shards").rglob("*.parquet")) == 20  # kept
    assert not (out / "validation.json").exists() and not (out / ".sweep.lock").exists()
