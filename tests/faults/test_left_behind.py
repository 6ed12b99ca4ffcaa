"""Nothing left running (issue 54): the training pool and the resource trackers a sweep starts end with the
sweep, on success and failure, in the caller's own process (the Python API) and after it; a program whose
main thread ends while a sweep runs in another thread leaves no Dask worker behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.pipeline.conftest import FAKE, REPO

HANG = 240  # seconds: far above what any case takes; only a hang reaches it

_SWEEP_THEN_LOOK = """
import sys
import time
import psutil
import launchtune
from launchtune.pipeline.sweep import run

if sys.argv[3] == "fail":  # the sweep fails after its models are trained (the pool started)
    def fail(*args, **kwargs):
        raise RuntimeError("the re-measure failed")
    run._Sampled.remeasure = fail
try:
    launchtune.sweep(sys.argv[1], out=sys.argv[2], allow_workload=[sys.argv[4]], progress=False)
except RuntimeError as exc:
    print("failed:", exc)
left = [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
# the resource trackers are this process's own (multiprocessing's and loky's), and end with it
print("left:", [c for p in left if "resource_tracker" not in (c := " ".join(p.cmdline()))])
"""


@pytest.mark.parametrize("ending", ["ok", "fail"])
def test_the_training_pool_and_its_trackers_end_with_the_sweep(tmp_path, write_spec, ending):
    """A sweep through the Python API (one device: measured in the caller's process), models trained in
    joblib's process pool: once ``sweep`` returns or raises, the pool's workers are gone (they waited 300 s
    for more work, holding the trackers' pipe, and outlived a caller that ended meanwhile, re-parented to pid
    1), and once the caller ends, nothing of it runs, trackers included; nothing printed after its end."""
    spec = write_spec(samples=20, batch_size=10)
    proc, stdout, stderr = _run_program(
        tmp_path, _SWEEP_THEN_LOOK, spec, tmp_path / "out", ending, FAKE, hang="after"
    )
    assert proc.returncode == 0 and stderr == "", stderr[-3000:]
    if ending == "fail":
        assert "failed: the re-measure failed" in stdout, stdout[-2000:]
    assert "left: []" in stdout, stdout[-2000:]
    assert _left_in_group(proc.pid) == []


_SWEEP_IN_A_THREAD = """
import sys, threading, time
from pathlib import Path
import launchtune

kwargs = dict(out=sys.argv[2], allow_workload=[sys.argv[3]], progress=False, workers_per_class=2)
threading.Thread(target=launchtune.sweep, args=(sys.argv[1],), kwargs=kwargs, daemon=True).start()
while len(list(Path(sys.argv[2]).rglob("shard-*.parquet"))) < 2:  # the cluster's workers are measuring
    time.sleep(0.1)
print("the main thread ends", flush=True)
"""


def test_a_program_whose_main_thread_ends_during_a_sweep_in_a_thread_leaves_nothing(tmp_path, write_spec):
    """A program runs ``launchtune.sweep`` in a daemon thread (a GUI's, a server's) and its main thread ends:
    Python stopped the thread where it stood at the interpreter's end, and the sweep's lock was left (on a
    GPU, its workers held memory while they noticed). At the program's exit the sweep now unwinds as an
    interrupted one: its cluster closed, its lock released, no process of the program left."""
    spec = write_spec(samples=40, batch_size=4, options={"delay": 0.1})  # 0.4 s a batch, 10 batches
    out = tmp_path / "out"
    proc, stdout, stderr = _run_program(
        tmp_path, _SWEEP_IN_A_THREAD, spec, out, FAKE, hang="after its main thread ended"
    )
    assert proc.returncode == 0 and "the main thread ends" in stdout, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert not (out / ".sweep.lock").exists()
    assert _left_in_group(proc.pid) == []


def _run_program(cwd, script: str, *args, hang: str) -> tuple[subprocess.Popen, str, str]:
    """``script`` run by a Python of its own process group with ``args``; (the process, its stdout, its
    stderr), or an AssertionError, the group killed, where it still runs ``HANG`` s on."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"still running {HANG} s {hang}") from None
    return proc, stdout, stderr


def _left_in_group(pgid: int) -> list[str]:
    """The processes of group ``pgid`` still running a second on (a zombie, whose parent ended before it
    reaped it, runs nothing and waits for init to reap it)."""
    import psutil

    for _ in range(HANG * 10):
        left = []
        for p in psutil.process_iter():
            try:
                if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                    left.append(" ".join(p.cmdline())[-90:])
            except (OSError, psutil.Error):
                pass
        if not left:
            return []
        time.sleep(0.1)
    os.killpg(pgid, signal.SIGKILL)
    return left
