"""The one checked reader of files a user hands the project (specs, CUDA sources, ``.npy`` fills, tuning
tables, caches, a sweep folder's records): ``pipeline`` reads through it too (``pipeline.jsonio``).

A path is refused with one line, never a hang or a machine out of memory, when it is not a regular file (a
FIFO blocks the open until a writer comes; a device may never end), when it is larger than its reader's cap
(checked on the open descriptor before reading, then read at most the cap, so a file that grows meanwhile
does not slip through), or when it cannot be resolved (a symlink loop). It lives in ``kernels`` because the
kernel spec and the runtime autotuner read files too and ``kernels`` never imports ``pipeline``.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class FileRefused(ValueError):
    """A file that cannot be read as asked; the message is one line naming it and why."""


class DuplicateKey(ValueError):
    """A JSON object that names one key twice: ``json`` keeps the last silently, so which value was meant is
    not known; the reader names the file before the message."""

    def __init__(self, key: str):
        super().__init__(f"key {key!r} twice in one object (which of its values is meant is not known)")
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json``'s ``object_pairs_hook``: the object as a dict, :class:`DuplicateKey` where a key repeats."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def loads_json(text: str | bytes) -> Any:
    """``json.loads`` refusing an object with a key twice (:class:`DuplicateKey`, a ``ValueError``), for every
    JSON file a user hands the project or the project reads back: Kernel Tuner caches, tuning tables, a
    sweep folder's records, journal lines."""
    return json.loads(text, object_pairs_hook=unique_keys)


def kind_of(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def not_regular(path: Path | str, mode: int, what: str) -> FileRefused:
    return FileRefused(f"{path}: {kind_of(mode)} where a {what} file belongs; move it away")


def _cannot(path: Path | str, what: str, exc: BaseException) -> FileRefused:
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    return FileRefused(f"{path}: cannot read this {what} file ({why})"[:400])


def open_regular(path: Path | str, what: str = "data", missing_ok: bool = False) -> BinaryIO | None:
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
        raise FileRefused(f"{path}: no such file (the {what} to read)") from None
    except (OSError, ValueError) as exc:  # a symlink loop (ELOOP), a NUL in the name
        raise _cannot(path, what, exc) from None
    if not stat.S_ISREG(mode):
        raise not_regular(path, mode, what)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _cannot(path, what, exc) from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise _cannot(path, what, exc) from None
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise not_regular(path, mode, what)
    return os.fdopen(fd, "rb", closefd=True)


def read_regular(
    path: Path | str, what: str = "data", max_bytes: int | None = None, missing_ok: bool = False
) -> bytes | None:
    """The bytes of the regular file at ``path``: :func:`open_regular` (None where there is none and
    ``missing_ok``), and refused without reading where it holds more than ``max_bytes`` (None: no cap)."""
    file = open_regular(path, what, missing_ok)
    if file is None:
        return None
    with file:
        try:
            if max_bytes is not None:
                size = os.fstat(file.fileno()).st_size
                if size > max_bytes:
                    raise FileRefused(f"{path}: {size:,} bytes; a {what} file holds at most {max_bytes:,}")
                data = file.read(max_bytes + 1)
                if len(data) > max_bytes:  # it grew while we read
                    raise FileRefused(f"{path}: over {max_bytes:,} bytes; a {what} file holds at most that")
                return data
            return file.read()
        except OSError as exc:
            raise _cannot(path, what, exc) from None


def resolve_inside(base: Path, relative: str, what: str) -> Path:
    """``base / relative`` with every symlink followed, refused where it lands outside ``base`` (an
    absolute path, ``..``, a symlink out) or cannot be resolved (a loop): what a spec names stays by it."""
    try:
        root = Path(base).resolve()
        path = (root / relative).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise FileRefused(f"{what}: {relative!r} is not a usable path ({exc})"[:400]) from None
    if not path.is_relative_to(root):
        raise FileRefused(
            f"{what}: {relative!r} is outside the spec's folder {root} (keep it beside the spec)"
        )
    return path


def check_input(path: Path | str, what: str, folder_ok: bool = True, file_ok: bool = True) -> None:
    """A path given as input, refused with the one line that says what it is (missing, a symlink loop, a
    FIFO or a device, a file where a folder belongs or a folder where a file does) instead of "no such
    file" or "Not a directory" for all of them."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FileRefused(f"{path}: no such {what}") from None
    except (OSError, ValueError) as exc:  # ELOOP: a symlink loop; a NUL in the name
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise FileRefused(f"{path}: cannot use it as a {what} ({why})"[:400]) from None
    if stat.S_ISDIR(mode):
        if not folder_ok:
            raise FileRefused(f"{path}: a directory where a {what} belongs")
    elif stat.S_ISREG(mode):
        if not file_ok:
            raise FileRefused(f"{path}: a file where a {what} (a folder) belongs")
    else:
        raise FileRefused(f"{path}: {kind_of(mode)} where a {what} belongs; move it away")


# The marker file a folder made by launchtune holds (``pipeline.store.ownership`` writes it); here because the
# runtime tuner, in ``kernels``, must not write its pick cache into such a folder either.
MARKER = ".launchtune"
# What a folder made before markers holds beside its ``sweep.json`` (a sweep's plan, shards or merged rows).
_SWEEP_PARTS = ("plan", "shards", "merged")


def project_folder_above(path: Path | str) -> Path | None:
    """The folder made by launchtune (a sweep's, or ``combine``'s) that holds ``path``: ``path`` itself or
    the nearest folder above it with the ``.launchtune`` marker, or with a ``sweep.json`` beside a ``plan/``,
    ``shards/`` or ``merged/`` folder (a sweep made before markers). None where no such folder holds it.

    Every command and API call that writes a file a user names (an export, a dataset, a cache, a table) asks
    this first: a sweep folder's files are the sweep's, and another tool writing there replaces its records.
    """
    try:
        here = Path(os.path.abspath(path))
        resolved = Path(path).resolve()
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL in the name: the writer says so
        return None
    for start in dict.fromkeys((here, resolved)):  # as named, and with its symlinks followed
        for folder in (start, *start.parents):
            try:
                if (folder / MARKER).is_file():
                    return folder
                if (folder / "sweep.json").is_file() and any((folder / p).is_dir() for p in _SWEEP_PARTS):
                    return folder
            except (OSError, ValueError):
                continue
    return None
