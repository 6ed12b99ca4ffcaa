"""Reading the files of a sweep folder safely, and its JSON files (sweep.json, plan, metrics, validation,
report, timing): read one that may be missing, write one atomically so a killed run never leaves half a file.

Every file the project reads back from a folder is read through :func:`read_regular_bytes`: a FIFO, a device
or a directory where a file belongs is one line, never a hang (opening a FIFO for reading blocks until a
writer comes; reading a device may never end).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from launchtune.kernels.atomic import write_text
from launchtune.pipeline.errors import UserError

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _not_regular(path: Path, mode: int, what: str) -> UserError:
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    return UserError(f"{path}: {kind} where a {what} file belongs; move it away")


def check_regular(path: Path, what: str = "data") -> None:
    """Refuse ``path`` unless it is a regular file (symlinks followed), without opening it: for readers that
    open the path themselves (pyarrow's datasets). :func:`read_regular_bytes` is the race-free form."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise UserError(f"{path}: cannot read this {what} file ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode, what)


def open_regular(path: Path, what: str = "data", missing_ok: bool = False) -> BinaryIO | None:
    """The regular file at ``path`` opened for reading in binary (None where there is none and
    ``missing_ok``); the caller closes it.

    Checked with ``stat`` before opening (so a device is never opened), then opened with ``O_NONBLOCK`` and
    checked again on the open descriptor (so a FIFO swapped in between is refused, not waited on).
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if missing_ok:
            return None
        raise UserError(f"{path}: no such file (the {what} to read)") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read this {what} file ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode, what)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise UserError(f"{path}: cannot read this {what} file ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise UserError(f"{path}: cannot read this {what} file ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_regular(path, mode, what)
    return os.fdopen(fd, "rb", closefd=True)


def read_regular_bytes(path: Path, what: str = "data", missing_ok: bool = False) -> bytes | None:
    """The bytes of the regular file at ``path`` (:func:`open_regular`; None where there is none and
    ``missing_ok``)."""
    file = open_regular(path, what, missing_ok)
    if file is None:
        return None
    try:
        with file:
            return file.read()
    except OSError as exc:
        raise UserError(f"{path}: cannot read this {what} file ({exc.strerror or exc})") from None


def parse_json(data: bytes | str, path: Path, what: str = "JSON") -> Any:
    """Parsed JSON, or one line naming the file (malformed, not UTF-8, nested past the recursion limit)."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"{path}: unreadable {what} ({text})") from None


def read_json(path: Path, what: str = "JSON") -> Any:
    """The parsed file, or None where there is none; an unreadable one (or a FIFO, a device, a directory in
    its place) is a user error naming it."""
    data = read_regular_bytes(path, what, missing_ok=True)
    return None if data is None else parse_json(data, path, what)


def write_json(path: Path, data: Any) -> None:
    """Write through a temporary file and a rename (atomic on one file system)."""
    write_text(path, json.dumps(data, indent=1, default=str) + "\n")
