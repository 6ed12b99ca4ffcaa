"""The CUDA side: one ``RawModule`` compiled from ``solver.cu``, seven kernels, each with its own grid.

Compiled with ``--fmad=false`` so every multiply and add rounds as numpy's does: the CuPy and numpy backends
then agree to the last bit except for sin/cos in the MMS source (the kernels are memory-bound, so fused
multiply-adds would buy little).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .physics import KERNEL_NAMES

SOURCE_FILE = Path(__file__).with_name("solver.cu")
COMPILE_OPTIONS = ("--fmad=false", "--std=c++14")


class CudaKernels:
    """Callables ``name(blocks, threads, *args)`` for the seven kernels, plus their compiled attributes."""

    def __init__(self, cupy: ModuleType):
        self._cp = cupy
        self.module = cupy.RawModule(code=SOURCE_FILE.read_text(), options=COMPILE_OPTIONS)
        self.functions = {name: self.module.get_function(name) for name in KERNEL_NAMES}

    def attributes(self) -> dict[str, dict[str, int]]:
        """Registers, local (spill) bytes and the largest block each compiled kernel can be launched with."""
        out = {}
        for name, fn in self.functions.items():
            out[name] = {
                "max_threads_per_block": int(fn.max_threads_per_block),
                "num_regs": int(fn.num_regs),
                "local_size_bytes": int(fn.local_size_bytes),
            }
        return out

    def launcher(self, name: str) -> Callable[..., None]:
        fn = self.functions[name]

        def launch(blocks: int, threads: int, *args: Any) -> None:
            fn((int(blocks),), (int(threads),), tuple(_arg(a) for a in args))

        return launch


def _arg(a: Any) -> Any:
    if isinstance(a, bool):
        return np.int32(a)
    if isinstance(a, int | np.integer):
        return np.int32(a)
    if isinstance(a, float | np.floating):
        return np.float64(a)
    return a
