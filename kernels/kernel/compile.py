"""Compiling a kernel spec's source once per distinct set of defines, ahead of the GPU where it can.

Each configuration's source is the spec's source after ``#define NAME VALUE`` lines (``KernelSpec.defines``)
and ``#line 1``, compiled by CuPy's ``RawModule`` (NVRTC, with CuPy's disk cache: a rerun loads what an
earlier run compiled). Configurations with the same defines share one module (:func:`cache_key`).

A sweep measures configurations one after another, and NVRTC takes 0.5-1 s for a kernel that runs in
milliseconds, so the GPU would mostly wait on the compiler. :class:`Compiler` therefore compiles ahead: given
the configurations about to be measured, a pool of threads compiles them in order on the host's cores while
the GPU measures the ones already compiled. Threads suffice because CuPy releases the GIL around
``nvrtcCompileProgram`` and NVRTC compiles independent programs concurrently. ``workers=0`` compiles each
configuration when it is needed (the comparison of ``benchmarks/kernel_convolution_gpu.sh``).

A source that does not compile is not an exception here but a :class:`Compiled` with ``error`` set to the
compiler's first error line, which the workload reports as an ``invalid`` row.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def source_with_defines(code: str, defines: Mapping[str, Any], headers: str = "") -> str:
    """``code`` after one ``#define`` per entry and ``#line 1`` (so the compiler's line numbers are the
    file's own), as Kernel Tuner prepares a kernel; ``headers`` (:func:`header_digest`) goes in a comment
    first, so a compiler cache keyed by the text (CuPy's on disk) sees an edited header as a new source."""
    prefix = f"// launchtune: local headers {headers}\n" if headers else ""
    prefix += "".join(f"#define {name} {value}\n" for name, value in defines.items())
    return f"{prefix}#line 1\n{code}"


def cache_key(code: str, defines: Mapping[str, Any], options: Iterable[str], headers: str = "") -> str:
    """One key per distinct (source, defines in order, compiler options, local headers): configurations
    that differ only in what does not reach the compiler share a module."""
    blob = json.dumps([code, list(defines.items()), list(options), headers], separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def build_function(cp: Any, source: str, options: Iterable[str], kernel_name: str) -> tuple[Any, Any]:
    """Compile ``source`` with CuPy (NVRTC) and load ``kernel_name``: (module, function). The function's
    attributes are read here, so the module is loaded on the calling (compiling) thread, not at launch."""
    module = cp.RawModule(code=source, options=tuple(options), name_expressions=[kernel_name])
    function = module.get_function(kernel_name)
    function.max_threads_per_block  # noqa: B018  (loads the module)
    return module, function


_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
MAX_HEADERS = 256


def local_headers(code: str, folder: Path, include_dirs: Sequence[Path]) -> list[Path]:
    """The files ``#include "..."`` reaches from ``code`` (in ``folder``), transitively, found as the
    compiler finds them: the including file's folder first, then ``include_dirs``. ``<...>`` includes are
    the system's and not followed; a name found nowhere is left for the compiler to report."""
    found: list[Path] = []
    todo = [(code, folder)]
    while todo and len(found) < MAX_HEADERS:
        text, here = todo.pop()
        for name in _INCLUDE.findall(text):
            for base in (here, *include_dirs):
                path = (base / name).resolve()
                if path.is_file():
                    if path not in found:
                        found.append(path)
                        try:
                            todo.append((path.read_text(encoding="utf-8", errors="replace"), path.parent))
                        except OSError:
                            pass
                    break
    return found


def header_digest(spec: Any) -> str:
    """A digest of the local headers the spec's source includes and its further source files (empty where
    there are none): part of each configuration's compile-cache key."""
    paths = local_headers(spec.code, spec.source.parent, spec.include_dirs)
    paths += [p for p in spec.extra_sources if p not in paths]
    if not paths:
        return ""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path).encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()[:16]


def first_error_line(log: str) -> str:
    """The compiler's first line that says ``error`` (else its first non-empty line), for a row's reason."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower():
            return line[:300]
    return (lines[0] if lines else "compilation failed")[:300]


@dataclass(frozen=True)
class Compiled:
    """A compiled configuration: its module and function, or the compiler's first error line."""

    key: str
    module: Any = None
    function: Any = None
    compile_ms: float = 0.0
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def default_workers() -> int:
    """The cores this process may use, less one for the measuring thread, at least one, at most 32 (NVRTC
    holds a few hundred MB of host memory per compile in flight)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(32, cores - 1))


class Compiler:
    """Compiles (source, defines) pairs through ``build`` with a bounded pool; :meth:`ahead` queues
    configurations, :meth:`get` returns one, compiling it now if nobody has yet."""

    def __init__(
        self, build: Callable[[Any], Any], workers: int, initializer: Callable[[], None] | None = None
    ):
        """``build(source)`` returns a compiled function's (module, function) or raises with the compiler's
        log in its message; ``initializer`` runs once on each pool thread (to make the GPU current)."""
        self._build = build
        self._pool = ThreadPoolExecutor(workers, "compile", initializer) if workers > 0 else None
        self._futures: dict[str, Future[Compiled]] = {}
        self._done: dict[str, Compiled] = {}
        self._lock = threading.Lock()
        self.workers = workers

    def _compile(self, key: str, source: Any) -> Compiled:
        start = time.perf_counter()
        try:
            module, function = self._build(source)
        except Exception as exc:  # a compile error of this configuration is data, not a crash
            ms = (time.perf_counter() - start) * 1e3
            return Compiled(key, compile_ms=ms, error=first_error_line(str(exc)) or type(exc).__name__)
        return Compiled(key, module, function, (time.perf_counter() - start) * 1e3)

    def ahead(self, items: Iterable[tuple[str, Any]]) -> int:
        """Queue (key, source) pairs not compiled or queued yet, in order; how many were queued."""
        if self._pool is None:
            return 0
        queued = 0
        with self._lock:
            for key, source in items:
                if key in self._done or key in self._futures:
                    continue
                self._futures[key] = self._pool.submit(self._compile, key, source)
                queued += 1
        return queued

    def get(self, key: str, source: Any) -> tuple[Compiled, bool]:
        """The compiled configuration and whether this call made it (False: compiled before, by an
        earlier call or ahead on the pool, whose time was already counted or overlapped the GPU)."""
        with self._lock:
            if key in self._done:
                return self._done[key], False
            future = self._futures.get(key)
        compiled = future.result() if future is not None else self._compile(key, source)
        with self._lock:
            self._futures.pop(key, None)
            first = key not in self._done
            self._done.setdefault(key, compiled)
        return self._done[key], first

    def pending(self) -> int:
        with self._lock:
            return sum(not f.done() for f in self._futures.values())

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
