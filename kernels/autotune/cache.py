"""The runtime tuner's memory: locked picks per (GPU class, kernel identity, key), one JSON file per user.

So the second run of a program tunes nothing: ``autotune`` looks its key up here first and locks what an
earlier run found. The file lives in the user's cache directory (``$XDG_CACHE_HOME/launchtune``, by default
``~/.cache/launchtune``), as pip's and CuPy's caches do. The kernel identity is a hash of the source (or the
compiled kernel's code) with every tunable parameter, restriction, grid rule and compiler option, so an edit
of any of them misses the old picks instead of locking something that no longer means the same.

A cache is never worth a crash: a file that cannot be read or parsed is one warning, then an empty cache (the
run tunes afresh and writes a good file over it); a file that cannot be written is one warning too.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from launchtune.kernels.atomic import write_text
from launchtune.kernels.files import loads_json

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
    """Picks read from and written to one file; every ``put`` re-reads the file first, so two programs
    sharing it keep each other's picks (the write is atomic: a temporary file renamed over it)."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_cache_file()
        self._warned = False

    @staticmethod
    def entry_key(gpu_class: str, identity: str, key_text: str) -> str:
        return f"{gpu_class}|{identity}|{key_text}"

    def _warn(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(f"{self.path}: {why}; tuning afresh", RuntimeWarning, stacklevel=4)

    def _read(self) -> dict[str, Any]:
        try:
            if self.path.stat().st_size > MAX_BYTES:
                self._warn(f"autotune cache over {MAX_BYTES:,} bytes, ignored")
                return {}
            doc = loads_json(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            self._warn(f"unreadable autotune cache ({type(exc).__name__}: {str(exc)[:100]})")
            return {}
        if not (
            isinstance(doc, Mapping) and doc.get("format") == FORMAT and isinstance(doc.get("picks"), dict)
        ):
            self._warn(f"not an autotune cache (no '{FORMAT}' format with a 'picks' object)")
            return {}
        picks = {k: v for k, v in doc["picks"].items() if _well_formed(k, v)}
        if len(picks) != len(doc["picks"]):
            self._warn(f"{len(doc['picks']) - len(picks)} malformed autotune cache entries dropped")
        return picks

    def get(self, gpu_class: str, identity: str, key_text: str) -> dict[str, Any] | None:
        """The stored pick (``config``: name -> int, ``ms``), or None."""
        entry = self._read().get(self.entry_key(gpu_class, identity, key_text))
        return None if entry is None else {"config": dict(entry["config"]), "ms": entry.get("ms")}

    def put(
        self, gpu_class: str, identity: str, key_text: str, config: Mapping[str, int], **extra: Any
    ) -> None:
        picks = self._read()
        picks[self.entry_key(gpu_class, identity, key_text)] = {
            "config": {k: int(v) for k, v in config.items()},
            "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **extra,
        }
        self._write(picks)

    def clear(self, identity: str | None = None) -> int:
        """Forget every pick (``identity`` None: remove the file) or one kernel's; how many were dropped."""
        picks = self._read()
        if identity is None:
            self.path.unlink(missing_ok=True)
            return len(picks)
        kept = {k: v for k, v in picks.items() if k.split("|")[1:2] != [identity]}
        if len(kept) != len(picks):
            self._write(kept)
        return len(picks) - len(kept)

    def _write(self, picks: Mapping[str, Any]) -> None:
        doc = {"format": FORMAT, "version": 1, "picks": picks}
        try:
            write_text(self.path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
        except OSError as exc:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"{self.path}: cannot write the autotune cache ({exc})", RuntimeWarning, stacklevel=4
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
