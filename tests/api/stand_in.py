"""A CPU stand-in for the ``kernel`` workload, for the Python API's tests: the real ``KernelWorkload`` (spec,
arguments from ``.npy`` files, answers, restrictions, checks, timing's bookkeeping) built on the fake CuPy of
``tests.kernel.fake_cupy``, whose emulated ``scale`` kernel computes ``out = 2 * in`` (``#define
wrong 1``: a wrong answer). Its launches take :func:`fake_ms` of the configuration, so the best
configuration is known in advance."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from launchtune.kernels.backend import Backend
from launchtune.kernels.kernel import workload as workload_module
from tests.kernel import fake_cupy

_LAST = threading.local()
_BUILD = threading.Lock()


def fake_ms(config: Mapping[str, int]) -> float:
    """The stand-in's time of a launch: fastest at 64 threads and a tile of 2; a wrong answer faster still."""
    return (
        1.0
        + abs(config["block_size_x"] - 64) / 64
        + abs(config["tile"] - 2) / 4
        - 0.5 * config.get("wrong", 0)
    )


class _Function(fake_cupy.FakeFunction):
    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        _LAST.defines = self.defines
        super().__call__(grid, block, args, shared_mem, stream)


class _Module(fake_cupy.FakeModule):
    def __init__(self, code: str, options=(), name_expressions=()):
        super().__init__(code, options, name_expressions)
        self.function = _Function(self.function.defines)


def fake_backend() -> Backend:
    cp = fake_cupy.fake_cupy()
    cp.RawModule = _Module
    cp.cuda.get_elapsed_time = lambda start, stop: fake_ms(_LAST.defines)
    return Backend("cupy", cp)


def make(case: str, size: Any, backend: str = "auto", **options: Any) -> workload_module.KernelWorkload:
    """The kernel workload as a ``module:factory`` workload, on the fake CuPy (swapped in only while it is
    built: the workload keeps its backend, nothing else in the process sees it)."""
    with _BUILD:
        original = workload_module.get_backend
        workload_module.get_backend = lambda name: fake_backend()
        try:
            return workload_module.KernelWorkload(case, size, backend, **options)
        finally:
            workload_module.get_backend = original
