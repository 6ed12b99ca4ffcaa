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

from launchtune.kernels import files
from launchtune.kernels.atomic import write_text

from .errors import UserError


def check_regular(path: Path, what: str = "data") -> None:
    """Refuse ``path`` unless it is a regular file (symlinks followed), without opening it: for readers that
    open the path themselves (pyarrow's datasets). :func:`read_regular_bytes` is the race-free form."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{path}: cannot read this {what} file ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    if not stat.S_ISREG(mode):
        raise UserError(str(files.not_regular(path, mode, what)))


def check_input(path: Path | str, what: str, folder_ok: bool = True, file_ok: bool = True) -> None:
    """``kernels.files.check_input`` as a UserError: a path given as input refused with the one line that
    says what it is (missing, a symlink loop, a FIFO, a file where a folder belongs or the reverse)."""
    try:
        files.check_input(path, what, folder_ok, file_ok)
    except files.FileRefused as exc:
        raise UserError(str(exc)) from None


def open_regular(path: Path, what: str = "data", missing_ok: bool = False) -> BinaryIO | None:
    """The regular file at ``path`` opened for reading in binary (None where there is none and
    ``missing_ok``); the caller closes it (``kernels.files.open_regular``, its refusal a UserError)."""
    try:
        return files.open_regular(path, what, missing_ok)
    except files.FileRefused as exc:
        raise UserError(str(exc)) from None


def read_regular_bytes(
    path: Path, what: str = "data", missing_ok: bool = False, max_bytes: int | None = None
) -> bytes | None:
    """The bytes of the regular file at ``path`` (None where there is none and ``missing_ok``), refused
    without reading where it holds more than ``max_bytes`` (``kernels.files.read_regular``)."""
    try:
        return files.read_regular(path, what, max_bytes, missing_ok)
    except files.FileRefused as exc:
        raise UserError(str(exc)) from None


def parse_json(data: bytes | str, path: Path, what: str = "JSON") -> Any:
    """Parsed JSON, or one line naming the file (malformed, not UTF-8, nested past the recursion limit, a key
    twice in one object)."""
    try:
        return files.loads_json(data)
    except files.DuplicateKey as exc:
        raise UserError(f"{path}: {what}: {exc}") from None
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
