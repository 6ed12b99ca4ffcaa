"""The fused stage kernels (``fused.cu``, issue 16): compiled per variant, cached per process, timed apart.

A variant is the set of compile-time constants: ``smem`` (state tile staged in shared memory), ``faces``
(how face fluxes are shared: 0 recomputed, 1 in shared memory, 2 marching), ``maxreg`` (a register cap, 0 =
the compiler's choice), ``arith``, and the case's source mode and the scheme's limiter (fixed for a solver:
only that limiter's branch is compiled, which saves registers; the arithmetic is the same). Each variant is
one ``RawModule`` of ``solver.cu`` + ``fused.cu`` (so the fused kernels call the seven kernels' own device
functions), compiled with the seven kernels' options (``--fmad=false``) where ``arith`` is 0; ``arith`` 1 lets
nvcc contract multiply-adds into FMAs and takes fewer divisions and roots in HLLC and the update
(``fused.cu``'s ``RECIP``): another rounding, so not the seven kernels' bits. The first use of a variant in a
process compiles it (or loads it from CuPy's on-disk cache) and records how long that took;
``compile_ms_total`` is what callers subtract from wall time, and no compile ever happens inside a timed
launch.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from .cuda_kernels import COMPILE_OPTIONS, SOURCE_FILE, _arg

FUSED_FILE = Path(__file__).with_name("fused.cu")
DIRECTIONAL_KERNELS = ("xi_face", "eta_face", "cell_update")
STAGE_KERNELS = ("stage_fused",)
FUSED_KERNELS = DIRECTIONAL_KERNELS + STAGE_KERNELS


@dataclass(frozen=True)
class Variant:
    key: tuple[int, int, int, int, int, int | None]  # (smem, faces, source, maxreg, arith, limiter)
    functions: dict[str, Any]
    attributes: dict[str, dict[str, int]]
    compile_ms: float


def variant_options(
    smem: int, faces: int, source: int, maxreg: int, arith: int = 0, limiter: int | None = None
) -> tuple[str, ...]:
    """nvcc options of a variant; ``arith`` 1: FMA contraction (one rounding instead of two) and ``RECIP``;
    ``limiter`` (a code of ``kernels.cfd.physics.LIMITERS``) fixes the kernels' limiter at compile time, and
    the launches must then pass that very code (None: the run-time argument decides)."""
    base: tuple[str, ...] = COMPILE_OPTIONS
    if arith:
        base = tuple("--fmad=true" if o == "--fmad=false" else o for o in COMPILE_OPTIONS)
    opts: tuple[str, ...] = (
        *base,
        f"-DSMEM={int(smem)}",
        f"-DFACES={int(faces)}",
        f"-DSOURCE={int(source)}",
        f"-DRECIP={int(bool(arith))}",
    )
    if limiter is not None:
        opts += (f"-DLIMITER={int(limiter)}",)
    if maxreg:
        opts += (f"--maxrregcount={int(maxreg)}",)
    return opts


class FusedKernels:
    """Compiles and launches the fused variants; the cache belongs to the class, so it lives with the
    process."""

    _cache: ClassVar[dict[tuple[str | int | None, ...], Variant]] = {}
    compile_ms_total: ClassVar[float] = 0.0

    def __init__(
        self, cupy: ModuleType, source_mode: int, limiter: int | None = None, fused_code: str | None = None
    ):
        """``fused_code``: the text to compile instead of ``fused.cu`` (another revision of it, for A/B runs
        such as ``lab/cfd_kernel_ab.py``); variants of different texts are cached apart."""
        self._cp = cupy
        self.source = int(bool(source_mode))
        self.limiter = None if limiter is None else int(limiter)
        fused = FUSED_FILE.read_text() if fused_code is None else fused_code
        self._code = SOURCE_FILE.read_text() + "\n" + fused
        self._code_id = hashlib.sha1(self._code.encode()).hexdigest()[:16]

    def variant(self, smem: int, faces: int, maxreg: int, arith: int = 0) -> Variant:
        key = (int(smem), int(faces), self.source, int(maxreg), int(bool(arith)), self.limiter)
        got = FusedKernels._cache.get((self._code_id, *key))
        if got is not None:
            return got
        t = time.perf_counter()
        module = self._cp.RawModule(code=self._code, options=variant_options(*key))
        functions = {name: module.get_function(name) for name in FUSED_KERNELS}
        attributes = {
            name: {
                "max_threads_per_block": int(fn.max_threads_per_block),
                "num_regs": int(fn.num_regs),
                "local_size_bytes": int(fn.local_size_bytes),
            }
            for name, fn in functions.items()
        }
        ms = (time.perf_counter() - t) * 1e3
        FusedKernels.compile_ms_total += ms
        got = Variant(key, functions, attributes, ms)
        FusedKernels._cache[(self._code_id, *key)] = got
        return got

    @classmethod
    def compiled(cls) -> dict[tuple[str | int | None, ...], Variant]:
        """Every variant this process has compiled (a copy): (source text id, *variant key) to the variant."""
        return dict(cls._cache)

    @staticmethod
    def launcher(fn: Any) -> Callable[..., None]:
        def launch(grid: tuple[int, int], block: tuple[int, int], shared: int, *args: Any) -> None:
            if shared > 48 * 1024 and fn.max_dynamic_shared_size_bytes < shared:
                fn.max_dynamic_shared_size_bytes = int(shared)  # opt in beyond 48 KiB (the space bounds it)
            fn(grid, block, tuple(_arg(a) for a in args), shared_mem=int(shared))

        return launch
