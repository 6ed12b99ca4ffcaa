"""Two sweeps into one folder: the second is refused naming the holder; a dead holder's lock is taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.lock import LOCK_NAME, sweep_lock
from tests.pipeline.conftest import one_line_error, run_cli_here


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _lock(folder, pid: int, host: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    holder = {"host": host or socket.gethostname(), "pid": pid, "started": "2026-11-23T00:00:00+00:00"}
    (folder / LOCK_NAME).write_text(json.dumps(holder))


def test_a_folder_in_use_is_refused_with_one_line_naming_the_holder(tmp_path, write_spec):
    out = tmp_path / "sweep"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _lock(out, holder.pid)
        line = one_line_error(run_cli_here("sweep", str(write_spec()), "--out", str(out), cwd=tmp_path))
    finally:
        holder.kill()
    assert f"in use by process {holder.pid} on {socket.gethostname()}" in line
    assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # nothing measured, the lock left alone


def test_a_lock_from_another_host_is_refused_with_how_to_remove_it(tmp_path):
    _lock(tmp_path, 4242, host="login2")
    with pytest.raises(UserError, match=r"process 4242 on login2 .*remove .*\.sweep\.lock"):
        with sweep_lock(tmp_path):
            pass


def test_a_stale_lock_is_taken_over_with_a_note_and_released(tmp_path):
    pid = _dead_pid()
    _lock(tmp_path, pid)
    notes = []
    with sweep_lock(tmp_path, log=notes.append) as path:
        assert json.loads(path.read_text())["pid"] != pid
    assert len(notes) == 1 and f"stale lock of process {pid}" in notes[0]
    assert not (tmp_path / LOCK_NAME).exists()


def test_out_pointing_at_a_file_is_one_line(tmp_path, write_spec):
    afile = tmp_path / "afile"
    afile.write_text("x")
    line = one_line_error(run_cli_here("sweep", str(write_spec()), "--out", str(afile), cwd=tmp_path))
    assert "exists and is not a folder" in line and afile.read_text() == "x"


def test_a_lock_whose_pid_now_belongs_to_another_process_is_taken_over(tmp_path):
    """The lock names its holder by pid and start time: a live process that reuses the pid (here this test's
    own, with another start time) does not keep it."""
    _lock(tmp_path, os.getpid())
    held = json.loads((tmp_path / LOCK_NAME).read_text())
    held["pid_started"] = 12.0  # a process of that pid that started at boot, long gone
    (tmp_path / LOCK_NAME).write_text(json.dumps(held))
    notes = []
    with sweep_lock(tmp_path, log=notes.append):
        pass
    assert len(notes) == 1 and f"stale lock of process {os.getpid()}" in notes[0]


def test_the_lock_records_its_holders_start_time_and_a_live_holder_keeps_it(tmp_path):
    with sweep_lock(tmp_path) as path:
        held = json.loads(path.read_text())
        assert held["pid"] == os.getpid() and held["pid_started"] > 0
        with pytest.raises(UserError, match="in use by process"):
            with sweep_lock(tmp_path):
                pass


@pytest.mark.parametrize("content", ["", "{", "[1, 2]", '{"pid": "x"}', "\xff garbage"])
def test_a_lock_that_names_no_holder_is_taken_over_at_once(tmp_path, content):
    """Empty, torn or foreign: it said "in use by process None on ? (since ?)" and refused forever; then
    "another sweep is starting here" for ten seconds, and for ever after a full disk left it empty at each
    rerun. A lock is written whole before it has its name, so one naming no holder has none to wait for."""
    path = tmp_path / LOCK_NAME
    path.write_text(content, errors="surrogateescape")
    notes = []
    with sweep_lock(tmp_path, log=notes.append) as held:
        assert json.loads(held.read_text())["pid"] == os.getpid()
    assert len(notes) == 1 and "taking over a lock that names no holder" in notes[0]
    assert not path.exists()
