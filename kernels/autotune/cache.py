"""The runtime tuner's memory: locked picks per (GPU class, kernel identity, key), one JSON file per user.

So the second run of a program tunes nothing: ``autotune`` looks its key up here first and locks what an
earlier run found. The file lives in the user's cache directory (``$XDG_CACHE_HOME/launchtune``, by default
``~/.cache/launchtune``), as pip's and CuPy's caches do. The kernel identity is a hash of the source (or the
compiled kernel's code) with every tunable parameter, restriction, grid rule and compiler option, so an edit
of any of them misses the old picks instead of locking something that no longer means the same.

A cache is never worth a crash, nor worth a pick lost: a file that cannot be read, is too large or is not a
cache is one warning and is left as it is (it may be something else of the user's), the picks kept beside it
in ``<name>.kept.json`` (the warning says so); a file that cannot be written is one warning too. Two programs
sharing the file keep each other's picks: every write re-reads it under a lock. A path inside a folder
launchtune made (a sweep's ``tuning_table.json``, say) is refused: that folder's files are the sweep's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..atomic import write_text
from ..files import FileRefused, loads_json, project_folder_above, read_regular

FORMAT = "launchtune-autotune-cache"
FILE_NAME = "autotune.json"
MAX_BYTES = 16 * 2**20  # thousands of picks are a few hundred kilobytes; more is not this file


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/launchtune``, else ``~/.cache/launchtune`` (the XDG base directory rule)."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache") / "launchtune"


def default_cache_file() -> Path:
    return cache_dir() / FILE_NAME


class PickCache:
    """Picks read from and written to one file; every ``put`` re-reads the file under a lock first, so two
    programs sharing it keep each other's picks (the write is atomic: a temporary file renamed over it)."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_cache_file()
        folder = project_folder_above(self.path)
        if folder is not None:
            raise FileRefused(
                f"{self.path}: inside {folder}, a folder launchtune made; its files are the sweep's: give "
                f"cache= a file outside it (cache=True: {default_cache_file()})"
            )
        self._warned = False

    @property
    def kept(self) -> Path:
        """Where picks go while :attr:`path` holds something that is not a cache (left as it is)."""
        return self.path.with_name(f"{self.path.stem}.kept{self.path.suffix or '.json'}")

    @staticmethod
    def entry_key(gpu_class: str, identity: str, key_text: str) -> str:
        return f"{gpu_class}|{identity}|{key_text}"

    def _warn(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(f"{self.path}: {why}", RuntimeWarning, stacklevel=5)

    @staticmethod
    def _load(path: Path) -> tuple[dict[str, Any], str | None]:
        """The picks of the file at ``path`` as they are (``{}`` where there is none), and why it is not a
        cache (None where it is one)."""
        try:
            data = read_regular(path, "pick cache", MAX_BYTES, missing_ok=True)
            if data is None:
                return {}, None
            doc = loads_json(data.decode("utf-8"))
        except FileRefused as exc:
            return {}, str(exc).removeprefix(f"{path}: ")
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            return {}, f"unreadable autotune cache ({type(exc).__name__}: {str(exc)[:100]})"
        if not (
            isinstance(doc, Mapping) and doc.get("format") == FORMAT and isinstance(doc.get("picks"), dict)
        ):
            return {}, f"not an autotune cache (no '{FORMAT}' format with a 'picks' object)"
        return dict(doc["picks"]), None

    def _picks(self) -> tuple[Path | None, dict[str, Any]]:
        """The file picks are read from and written to (None: neither it nor :attr:`kept` is a cache), and
        its picks as they are (malformed entries included: a write keeps them)."""
        picks, why = self._load(self.path)
        if why is None:
            bad = sum(not _well_formed(k, v) for k, v in picks.items())
            if bad:
                self._warn(f"{bad} malformed autotune cache entries ignored (left as they are)")
            return self.path, picks
        picks, kept_why = self._load(self.kept)
        if kept_why is None:
            self._warn(f"{why}; left as it is: picks are read from and kept in {self.kept}")
            return self.kept, picks
        self._warn(f"{why}; left as it is, and so is {self.kept} ({kept_why}); tuning afresh, picks not kept")
        return None, {}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold an exclusive ``flock`` on ``.<name>.lock`` beside the cache while its picks are read, changed
        and renamed over it, so a second program's pick is not lost between its read and this rename.
        ``fcntl`` by hand: ten lines, and the ``filelock`` package is not a dependency. Where no lock file can
        be made (a read-only folder) the write that follows says why it cannot write."""
        lock = self.path.with_name(f".{self.path.name}.lock")
        flags = (
            os.O_RDWR
            | os.O_CREAT
            | os.O_NONBLOCK
            | getattr(os, "O_CLOEXEC", 0)
            | getattr(os, "O_NOFOLLOW", 0)
        )
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, flags, 0o644)
        except OSError:
            yield
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:  # a file system without flock: unlocked, as before
                pass
            yield
        finally:
            os.close(fd)  # releases the lock

    def get(self, gpu_class: str, identity: str, key_text: str) -> dict[str, Any] | None:
        """The stored pick (``config``: name -> int, ``ms``), or None."""
        key = self.entry_key(gpu_class, identity, key_text)
        _, picks = self._picks()
        entry = picks.get(key)
        if entry is None:
            return None
        if not _well_formed(key, entry):
            return None  # warned by _picks
        return {"config": dict(entry["config"]), "ms": entry.get("ms")}

    def put(
        self, gpu_class: str, identity: str, key_text: str, config: Mapping[str, int], **extra: Any
    ) -> None:
        with self._locked():
            target, picks = self._picks()
            if target is None:
                return
            picks[self.entry_key(gpu_class, identity, key_text)] = {
                "config": {k: int(v) for k, v in config.items()},
                "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                **extra,
            }
            self._write(target, picks)

    def clear(self, identity: str | None = None) -> int:
        """Forget every pick (``identity`` None: remove the file) or one kernel's; how many were dropped. A
        file that is not a cache is left as it is (its :attr:`kept` picks are the ones forgotten)."""
        with self._locked():
            target, picks = self._picks()
            if target is None:
                return 0
            if identity is None:
                target.unlink(missing_ok=True)
                return len(picks)
            kept = {
                k: v for k, v in picks.items() if not isinstance(k, str) or k.split("|")[1:2] != [identity]
            }
            if len(kept) != len(picks):
                self._write(target, kept)
            return len(picks) - len(kept)

    def _write(self, target: Path, picks: Mapping[str, Any]) -> None:
        doc = {"format": FORMAT, "version": 1, "picks": picks}
        try:
            write_text(target, json.dumps(doc, indent=1, sort_keys=True) + "\n")
        except OSError as exc:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"{target}: cannot write the autotune cache ({exc})", RuntimeWarning, stacklevel=5
                )


def _well_formed(key: Any, entry: Any) -> bool:
    """``gpu|identity|key`` -> ``{"config": {name: int, ...}, ...}``: anything else is not a pick."""
    if not isinstance(key, str) or key.count("|") < 2 or not isinstance(entry, Mapping):
        return False
    config = entry.get("config")
    return isinstance(config, Mapping) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in config.values()
    )


def clear_cache(path: str | Path | None = None) -> int:
    """Forget every locked pick of every kernel (the whole cache file); how many there were."""
    return PickCache(path).clear()
