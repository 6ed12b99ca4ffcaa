"""The one place that decides which array library runs a workload.

``cupy`` runs CUDA source on a GPU; ``numpy`` runs the same numerics on the CPU and is the reference every GPU
result is checked against. ``auto`` picks ``cupy`` where a GPU is visible, else ``numpy``. Nothing else in the
project does ``try: import cupy``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

BACKEND_NAMES = ("auto", "cupy", "numpy")


class BackendError(ValueError):
    """A backend was asked for that does not exist or cannot run here."""


def _import_cupy() -> ModuleType | None:
    try:
        import cupy
    except Exception:  # ImportError, or a CUDA library that fails to load
        return None
    return cupy


def gpu_count() -> int:
    """Number of CUDA devices CuPy can see (0 where CuPy or a GPU is missing)."""
    cupy = _import_cupy()
    if cupy is None:
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


@dataclass(frozen=True)
class Backend:
    """An array library plus the clock that times work on it."""

    name: str
    xp: ModuleType

    @property
    def is_gpu(self) -> bool:
        return self.name == "cupy"

    def asnumpy(self, a: Any) -> np.ndarray:
        return self.xp.asnumpy(a) if self.is_gpu else np.asarray(a)

    def synchronize(self) -> None:
        if self.is_gpu:
            self.xp.cuda.get_current_stream().synchronize()

    def stopwatch(self) -> Stopwatch:
        return EventStopwatch(self.xp) if self.is_gpu else HostStopwatch()


class Stopwatch:
    """Marks points in a stream of work; ``elapsed_ms(a, b)`` is the time between two marks.

    On the GPU the marks are CUDA events recorded on the current stream, so a whole step of asynchronous
    launches can be marked and read once at the end; on the CPU they are host clock readings.
    """

    def mark(self) -> Any:
        raise NotImplementedError

    def elapsed_ms(self, start: Any, stop: Any) -> float:
        raise NotImplementedError


class HostStopwatch(Stopwatch):
    def mark(self) -> float:
        return time.perf_counter()

    def elapsed_ms(self, start: float, stop: float) -> float:
        return (stop - start) * 1e3


class EventStopwatch(Stopwatch):
    def __init__(self, cupy: ModuleType):
        self._cupy = cupy

    def mark(self) -> Any:
        event = self._cupy.cuda.Event()
        event.record()
        return event

    def elapsed_ms(self, start: Any, stop: Any) -> float:
        stop.synchronize()
        return float(self._cupy.cuda.get_elapsed_time(start, stop))


def get_backend(name: str = "auto") -> Backend:
    """Resolve a backend name; ``auto`` is CuPy where a GPU is visible, else numpy."""
    if name not in BACKEND_NAMES:
        raise BackendError(f"unknown backend {name!r}: choose one of {', '.join(BACKEND_NAMES)}")
    if name == "numpy":
        return Backend("numpy", np)
    cupy = _import_cupy()
    have_gpu = cupy is not None and gpu_count() > 0
    if name == "cupy" and not have_gpu:
        raise BackendError(
            "backend 'cupy' needs CuPy and a visible CUDA GPU; none found (use --backend numpy)"
        )
    if have_gpu and cupy is not None:  # have_gpu says so; the second test tells the type checker
        return Backend("cupy", cupy)
    return Backend("numpy", np)
