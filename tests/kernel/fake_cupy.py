"""A stand-in for CuPy, enough of it for the kernel workload's Python to run on a CPU: arrays are numpy's,
``RawModule`` "compiles" a source by reading its ``#define`` lines and returns a kernel emulated in numpy.
The emulated kernel is the ``scale`` kernel of ``conftest.SOURCE``: ``out[i] = 2 * in[i]`` over ``n``, with
``#define broken 1`` a compile error, ``#define wrong 1`` a wrong answer, ``#define regs N`` that many
registers (max threads per block 65536 / N, as a GPU's register file allows). Real CuPy behaviour is tested
by ``test_gpu.py`` on a GPU; this file tests the workload's own logic (limits, checks, compiling ahead,
constant memory, timing's bookkeeping) where CI runs."""

from __future__ import annotations

import re
import threading
import types
from typing import Any

import numpy as np

from launchtune.kernels.backend import Backend

COMPILED: list[dict[str, int]] = []  # the defines of every compile, in order
_LOCK = threading.Lock()


class CompileException(Exception):
    pass


class FakeFunction:
    def __init__(self, defines: dict[str, int]):
        self.defines = defines
        self.num_regs = defines.get("regs", 32)
        self.max_threads_per_block = min(1024, 65536 // self.num_regs)
        self.shared_size_bytes = defines.get("static_shared", 0)
        self.launches: list[tuple[Any, Any]] = []

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        out, data, n = args
        d = self.defines
        span = grid[0] * block[0] * d.get("tile", 1)
        covered = min(int(n), span)
        out[:covered] = 2 * data[:covered] + (1.0 if d.get("wrong") else 0.0)
        self.launches.append((grid, block))


class FakeModule:
    def __init__(self, code: str, options=(), name_expressions=()):
        defines = {m[0]: int(m[1]) for m in re.findall(r"^#define (\w+) (-?\d+)$", code, re.MULTILINE)}
        with _LOCK:
            COMPILED.append(defines)
        if defines.get("broken"):
            raise CompileException('kern.cu(3): error: identifier "nonsense" is undefined\n1 error detected')
        self.function = FakeFunction(defines)
        self.constants: dict[str, np.ndarray] = {"d_table": np.zeros(4, np.float32)}

    def get_function(self, name):
        return self.function

    def get_global(self, name):
        if name not in self.constants:
            raise RuntimeError("CUDA_ERROR_NOT_FOUND")
        return self.constants[name]


def _ndarray(shape, dtype, memptr):
    """``cupy.ndarray(shape, dtype, memptr)``: a view of constant memory (here the module's array)."""
    return memptr.reshape(shape).view(dtype)


class FakeEvent:
    def record(self, stream=None):
        pass

    def synchronize(self):
        pass


class FakeDevice:
    id = 0
    attributes = {"MaxSharedMemoryPerBlock": 49152}
    mem_info = (80 * 10**9, 80 * 10**9)

    def __init__(self, device_id: int = 0):
        pass

    def use(self):
        pass

    def synchronize(self):
        pass


def fake_cupy() -> types.ModuleType:
    cp = types.ModuleType("fake_cupy")
    for name in ("abs", "isfinite", "where", "argmax", "nan_to_num", "inf", "nan"):
        setattr(cp, name, getattr(np, name))
    cp.asarray = lambda a: np.array(a, copy=True)
    cp.asnumpy = np.asarray
    cp.ndarray = _ndarray
    cp.RawModule = FakeModule
    cp.cuda = types.SimpleNamespace(
        Device=FakeDevice, Event=FakeEvent, get_elapsed_time=lambda start, stop: 0.25
    )
    return cp


def fake_backend() -> Backend:
    return Backend("cupy", fake_cupy())
