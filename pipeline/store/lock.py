"""One sweep at a time per folder: a lock file naming the host and process that hold it.

Two sweeps into one folder would both measure everything, each under the other's load. The lock is a file
created with ``O_EXCL`` (atomic on local and NFS v3+ file systems) holding host, pid, start time and command.
A lock whose process is gone (same host, no such pid) is stale and taken over with a note; a lock held from
another host cannot be checked from here, so it is refused with what is needed to remove it by hand.

Hand-written because ``fcntl``/``flock`` locks vanish silently on some network file systems and name no
holder, and the file-lock packages (filelock) do not say who holds a lock either.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from ..errors import UserError
from ..jsonio import read_regular_bytes
from ..paths import make_folder

logger = logging.getLogger(__name__)

LOCK_NAME = ".sweep.lock"


def _started(pid: int) -> float | None:
    """When process ``pid`` started (psutil: seconds since the epoch), None where there is no such process."""
    try:
        return round(psutil.Process(pid).create_time(), 2)
    except psutil.NoSuchProcess:
        return None
    except psutil.Error:  # another user's process we may not inspect: alive, start unknown
        return -1.0


def _alive(pid: int, started: Any = None) -> bool:
    """Whether the lock's holder still runs: a process of that pid that started when the lock says (a pid
    reused by a later process does not keep the lock); a lock without the start time (older) goes by pid."""
    now = _started(pid)
    if now is None:
        return False
    if not isinstance(started, int | float) or now < 0:
        return True
    return abs(now - started) < 0.05


def _holder(path: Path) -> dict[str, Any]:
    try:  # a FIFO or a device named like the lock is one line (read_regular_bytes), not a hang
        return dict(json.loads(read_regular_bytes(path, "sweep lock", missing_ok=True) or b"{}"))
    except (OSError, ValueError, TypeError):
        return {}  # half-written or foreign: treated as held by an unknown process


def _create(path: Path, me: dict[str, Any]) -> bool:
    """Create the lock holding ``me`` whole, or return False where one exists. Written to a temporary file
    first and hard-linked to the lock's name (``link`` fails where the name exists, atomically on local and
    NFS file systems): a lock is never seen empty or half-written, so one that names no holder has none
    (a full disk used to leave an empty lock, and the rerun was told "another sweep is starting here")."""
    tmp = path.with_name(f"{path.name}.{socket.gethostname()}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        with open(tmp, "x") as f:
            json.dump(me, f)
        try:
            os.link(tmp, path)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            # no hard links on this file system (FAT, some FUSE): created in place, as exclusive
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump(me, f)
            except OSError:
                path.unlink(missing_ok=True)
                raise
    except FileExistsError:
        return False
    except OSError as exc:  # a full or read-only disk: the lock asked for is named, not the temporary file
        raise OSError(exc.errno, exc.strerror or os.strerror(exc.errno or 0), str(path)) from exc
    finally:
        tmp.unlink(missing_ok=True)
    return True


@contextmanager
def sweep_lock(folder: Path, log: Callable[[str], Any] = logger.info) -> Iterator[Path]:
    """Hold ``folder``'s lock while the block runs; refuse (UserError) if another live sweep holds it."""
    make_folder(folder)
    path = folder / LOCK_NAME
    me = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pid_started": _started(os.getpid()),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
    }
    if not _create(path, me):
        held = _holder(path)
        host, pid = held.get("host"), held.get("pid")
        if not isinstance(host, str) or not isinstance(pid, int):  # empty, torn or foreign: no holder named
            # a lock is written whole before it has its name (_create): this one has no holder to wait for
            note = f"taking over a lock that names no holder ({path} is empty or unreadable)"
        else:
            who = f"process {pid} on {host} (since {held.get('started', 'an unknown time')})"
            if host != me["host"]:
                raise UserError(
                    f"{folder}: in use by {who}; if that sweep is gone, remove {path} and run again"
                )
            if _alive(pid, held.get("pid_started")):
                raise UserError(f"{folder}: in use by {who}: wait for it, or stop it first")
            note = f"taking over a stale lock of {who}: that process is gone"
        log(f"note: {folder}: {note}")
        path.unlink(missing_ok=True)
        if not _create(path, me):  # another sweep took it over in between
            raise UserError(f"{folder}: another sweep took the lock just now; wait for it, or stop it first")
    try:
        yield path
    finally:
        if _holder(path).get("pid") == me["pid"]:
            path.unlink(missing_ok=True)
