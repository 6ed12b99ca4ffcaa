"""One sweep at a time per folder: a lock file naming the host and process that hold it.

Two sweeps into one folder would both measure everything, each under the other's load. The lock is a file
created with ``O_EXCL`` (atomic on local and NFS v3+ file systems) holding host, pid, start time and command.
A lock whose process is gone (same host, no such pid) is stale and taken over with a note; a lock held from
another host cannot be checked from here, so it is refused with what is needed to remove it by hand.

Hand-written because ``fcntl``/``flock`` locks vanish silently on some network file systems and name no
holder, and the file-lock packages (filelock) do not say who holds a lock either.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.errors import UserError
from pipeline.paths import make_folder

logger = logging.getLogger(__name__)

LOCK_NAME = ".sweep.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _holder(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return {}  # half-written or foreign: treated as held by an unknown process


def _create(path: Path, me: dict[str, Any]) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        json.dump(me, f)
    return True


@contextmanager
def sweep_lock(folder: Path, log: Callable[[str], Any] = logger.info) -> Iterator[Path]:
    """Hold ``folder``'s lock while the block runs; refuse (UserError) if another live sweep holds it."""
    make_folder(folder)
    path = folder / LOCK_NAME
    me = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
    }
    if not _create(path, me):
        held = _holder(path)
        host, pid = held.get("host", "?"), held.get("pid")
        who = f"process {pid} on {host} (since {held.get('started', '?')})"
        if host != me["host"]:
            raise UserError(f"{folder}: in use by {who}; if that sweep is gone, remove {path} and run again")
        if isinstance(pid, int) and _alive(pid):
            raise UserError(f"{folder}: in use by {who}: wait for it, or stop it first")
        log(f"note: {folder}: taking over a stale lock of {who}: that process is gone")
        path.unlink(missing_ok=True)
        if not _create(path, me):  # another sweep took it over in between
            raise UserError(f"{folder}: in use by {_holder(path).get('pid')} (it just started)")
    try:
        yield path
    finally:
        if _holder(path).get("pid") == me["pid"]:
            path.unlink(missing_ok=True)
