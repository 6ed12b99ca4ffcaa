"""The time-stepping solver: device state, the seven kernels of each Runge-Kutta stage, one launch hook.

Every kernel launch goes through ``Solver._launch``: a run-time tuning in ``solver.tuners[name]`` (a
``Tuning`` of ``kernels/autotune``, the object under ``autotune(...)``) gives the launch's (blocks, threads)
through ``.param`` and is told ``begin()`` and ``end()`` around it; otherwise the fixed configuration in
``solver.launch`` is used. The same hook records CUDA events (or host clock readings on numpy) when a caller
asks for per-kernel times.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..backend import get_backend
from ..space import Config, Space
from . import reference as ref
from .cases import build_case
from .cuda_kernels import CudaKernels
from .fused_kernels import (
    DIRECTIONAL_KERNELS,
    FUSED_KERNELS,
    STAGE_KERNELS,
    FusedKernels,
)
from .fused_space import (
    TILE_VALUES,
    DeviceLimits,
    build_fused_space,
    fused_violations,
    fusion_level,
    stage_shared_bytes,
    tile_of,
)
from .launch_space import build_space, default_config
from .physics import KERNEL_NAMES, LIMITERS, conserved

NUMPY_MAX_THREADS = 1024  # the CPU backend ignores launch shapes; this keeps its space the same as a GPU's
ALL_TIMED = KERNEL_NAMES + FUSED_KERNELS


@dataclass(frozen=True)
class Scheme:
    """Numerical options. kappa = -1 is the fully upwind MUSCL the seed recommends with discontinuities;
    minmod is the limiter that lets the inlet converge (van Albada and van Leer stall near 3 and 2 orders);
    the 4-stage scheme is Jameson's low-storage Runge-Kutta (alpha = 1/4, 1/3, 1/2, 1), local time steps."""

    kappa: float = -1.0
    epsilon: float = 1.0
    limiter: str = "minmod"
    cfl: float = 1.0
    stages: int = 4

    def __post_init__(self) -> None:
        if self.limiter not in LIMITERS:
            raise ValueError(f"unknown limiter {self.limiter!r}: choose one of {', '.join(LIMITERS)}")
        if not -1.0 <= self.kappa <= 1.0:
            raise ValueError(f"kappa must lie in [-1, 1], got {self.kappa}")
        if self.stages < 1 or self.stages > 6:
            raise ValueError(f"stages must be 1..6, got {self.stages}")
        if not 0 < self.cfl < math.inf:
            raise ValueError(f"cfl must be a positive finite number, got {self.cfl}")
        if not 0.0 <= self.epsilon <= 1.0:  # the MUSCL blend: 0 first order, 1 second (NaN refused too)
            raise ValueError(f"epsilon must lie in [0, 1], got {self.epsilon}")

    @property
    def alphas(self) -> tuple[float, ...]:
        return tuple(1.0 / (self.stages - k) for k in range(self.stages))


def parse_size(size: str | tuple[int, int] | list[int]) -> tuple[int, int]:
    """``"208x64"`` or ``(208, 64)`` -> (nx, ny); cells along xi (the flow) by cells along eta."""
    if isinstance(size, str):
        parts = size.lower().split("x")
        if len(parts) != 2 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
            raise ValueError(f"size {size!r} is not NXxNY (e.g. 208x64)")
        nx, ny = (int(p) for p in parts)
    else:
        try:
            nx, ny = (int(v) for v in size)
        except (TypeError, ValueError):
            raise ValueError(f"size {size!r} is not a pair (nx, ny)") from None
    if nx < 4 or ny < 4:
        raise ValueError(f"size {nx}x{ny} is too small: both NX and NY must be at least 4")
    if (nx + 4) * (ny + 4) * 4 > 2**31 - 1:
        raise ValueError(f"size {nx}x{ny} is too large for 32-bit indexing")
    return nx, ny


class Solver:
    kernel_names = KERNEL_NAMES

    def __init__(
        self,
        case: str,
        size: str | tuple[int, int],
        backend: str = "auto",
        scheme: Scheme | None = None,
        smoothing: int = 0,
        perturb: float = 0.0,
        seed: int = 0,
    ):
        self.size = parse_size(size)
        self.case = case
        self.scheme = scheme or Scheme()
        self.backend = get_backend(backend)
        nx, ny = self.size
        setup = build_case(case, nx, ny, smoothing)
        self.setup = setup
        m = setup.metrics
        V = setup.V.copy()
        if perturb:
            # A seeded perturbation of the interior makes every limiter and flux branch do real work in short
            # benchmark and check runs (a uniform start would leave most cells trivially uniform).
            rng = np.random.default_rng(seed)
            V[:, 2:-2, 2:-2] *= 1.0 + perturb * rng.uniform(-1.0, 1.0, V[:, 2:-2, 2:-2].shape)
        ref.fill_ghosts(
            V,
            V[:, 2:-2, 2:-2].copy(),
            m.sxx,
            m.sxy,
            m.sex,
            m.sey,
            setup.bw,
            setup.be,
            setup.bs,
            setup.bn,
            nx,
            ny,
        )
        xp = self.backend.xp
        a = xp.asarray
        self._V0 = a(V)
        self._U00 = a(np.ascontiguousarray(conserved(V[:, 2:-2, 2:-2])))
        self.V = self._V0.copy()
        self.U0 = self._U00.copy()
        self.sxx, self.sxy, self.sex, self.sey = a(m.sxx), a(m.sxy), a(m.sex), a(m.sey)
        self.vol, self.xc, self.yc = a(m.vol), a(m.xc), a(m.yc)
        self.dtv = a(np.ascontiguousarray(m.cell_dt_vectors()))
        self.bw, self.be, self.bs, self.bn = (
            a(b.astype(np.int32)) for b in (setup.bw, setup.be, setup.bs, setup.bn)
        )
        self.mms = a(np.ascontiguousarray(setup.mms_consts))
        z = lambda *shape: xp.zeros(shape, dtype=np.float64)  # noqa: E731
        self.xip, self.xim = z(4, ny, nx + 2), z(4, ny, nx + 2)
        self.etp, self.etm = z(4, ny + 2, nx), z(4, ny + 2, nx)
        self.F, self.G = z(4, ny, nx + 1), z(4, ny + 1, nx)
        self.S, self.R, self.dt = z(4, ny, nx), z(4, ny, nx), z(ny, nx)
        self._limiter = LIMITERS[self.scheme.limiter]
        e, k = self.scheme.epsilon, self.scheme.kappa
        self._c1, self._c2 = e / 4.0 * (1.0 - k), e / 4.0 * (1.0 + k)
        self._fused: FusedKernels | None = None  # built on the first fused configuration
        self._V_next = None  # the stage level's second state buffer (ping-pong), allocated on first use
        self.fusion = "none"
        self.tile = tile_of({})
        self._variant = None
        if self.backend.is_gpu:
            cuda = CudaKernels(xp)
            self._impl = {name: cuda.launcher(name) for name in KERNEL_NAMES}
            self.kernel_attributes = cuda.attributes()
            self.device_limits = DeviceLimits.of_cupy(xp)
        else:
            self.device_limits = DeviceLimits()
            self._impl = {name: _numpy_launcher(name) for name in KERNEL_NAMES}
            self.kernel_attributes = {
                name: {"max_threads_per_block": NUMPY_MAX_THREADS, "num_regs": 0, "local_size_bytes": 0}
                for name in KERNEL_NAMES
            }
        self.max_threads_per_block = {
            n: a["max_threads_per_block"] for n, a in self.kernel_attributes.items()
        }
        self.tuners: dict[str, Any] = {}
        self.launch: dict[str, tuple[int, int]] = {}
        self.set_config(self.default_config())
        self._record: list | None = None
        self._watch = self.backend.stopwatch()
        self.steps_done = 0

    # -- launch space -------------------------------------------------------------------------------------
    def domain_sizes(self) -> dict[str, int]:
        """How many cells or faces each kernel's grid-stride loop visits."""
        nx, ny = self.size
        return {
            "xi_limiter": (nx + 2) * ny,
            "eta_limiter": nx * (ny + 2),
            "xi_flux": (nx + 1) * ny,
            "eta_flux": nx * (ny + 1),
            "source": nx * ny,
            "rhs": nx * ny,
            "update": nx * ny,
        }

    def default_config(self) -> Config:
        return default_config(self.domain_sizes())

    def space(self, preset: str = "paper") -> Space:
        if preset == "fused":
            compiled = None
            if self.backend.is_gpu:
                self.compile_all_variants()
                compiled = self._compiled_limits
            return build_fused_space(
                self.domain_sizes(), self.max_threads_per_block, self.size, self.device_limits, compiled
            )
        return build_space(self.domain_sizes(), self.max_threads_per_block, preset)

    def set_config(self, config: Mapping[str, int]) -> None:
        """Fix every kernel's (blocks, threads); a configuration must set all fourteen parameters. With
        ``fusion`` (and ``tile.*``) it also picks the fused level; a fused configuration that cannot run (see
        ``fused_space.fused_violations``, or a block over the compiled variant's register limit) raises
        ``ValueError`` with the reason, before anything is launched."""
        problems = fused_violations(config, self.size, self.device_limits)
        if problems:
            raise ValueError("; ".join(problems))
        level, tile = fusion_level(config), tile_of(config)
        variant = None
        if level != "none" and self.backend.is_gpu:
            variant = self._fused_variant(tile, level)
            names = STAGE_KERNELS if level == "stage" else DIRECTIONAL_KERNELS
            threads = tile["tile.block_x"] * tile["tile.block_y"]
            for n in names:
                lim = variant.attributes[n]["max_threads_per_block"]
                if threads > lim:
                    raise ValueError(
                        f"{n}: block {tile['tile.block_x']}x{tile['tile.block_y']} = {threads} threads "
                        f"exceeds the compiled variant's limit of {lim} "
                        f"({variant.attributes[n]['num_regs']} registers)"
                    )
        launch = {}
        for name in KERNEL_NAMES:
            try:
                blocks, threads = int(config[f"{name}.blocks"]), int(config[f"{name}.threads"])
            except KeyError as e:
                raise ValueError(f"launch configuration lacks {e.args[0]}") from None
            if blocks < 1 or threads < 1 or threads > self.max_threads_per_block[name]:
                raise ValueError(
                    f"{name}: blocks={blocks}, threads={threads} cannot be launched "
                    f"(threads must be 1..{self.max_threads_per_block[name]})"
                )
            launch[name] = (blocks, threads)
        self.launch = launch
        self.fusion, self.tile, self._variant = level, tile, variant

    @property
    def fused_attributes(self) -> dict[str, dict[str, int]]:
        """Registers, block limit and local memory of the configured fused variant's kernels ({}: none)."""
        return {} if self._variant is None else self._variant.attributes

    def use_fused_code(self, code: str) -> None:
        """Compile the fused kernels from ``code`` (another revision of ``fused.cu``) instead of the file,
        from the next ``set_config`` on: A/B runs of kernel revisions in one process
        (``lab/cfd_kernel_ab.py``)."""
        self._fused = FusedKernels(self.backend.xp, self.setup.source_mode, self._limiter, fused_code=code)

    def _fused_variant(self, tile: Mapping[str, int], level: str):
        if self._fused is None:
            self._fused = FusedKernels(self.backend.xp, self.setup.source_mode, self._limiter)
        # directional does not use the shared-memory choices: one variant per register cap serves it
        smem, faces = (tile["tile.smem"], tile["tile.faces"]) if level == "stage" else (0, 0)
        return self._fused.variant(smem, faces, tile["tile.maxreg"], tile["tile.arith"])

    def compile_all_variants(self) -> float:
        """Compile (or load from CuPy's disk cache) every fused variant of this case, so that the fused space
        knows each kernel's register-limited block size and no sample compiles; returns the milliseconds."""

        before = self.compile_ms_total()
        for smem, faces, maxreg, arith in itertools.product(
            *(TILE_VALUES[f"tile.{k}"] for k in ("smem", "faces", "maxreg", "arith"))
        ):
            t = {"tile.smem": smem, "tile.faces": faces, "tile.maxreg": maxreg, "tile.arith": arith}
            self._fused_variant({**self.tile, **t}, "stage")
        return self.compile_ms_total() - before

    def _compiled_limits(self, level: str, tile: Mapping[str, int]) -> list[tuple[str, int, int]]:
        variant = self._fused_variant(tile, level)
        names = STAGE_KERNELS if level == "stage" else DIRECTIONAL_KERNELS
        return [
            (n, variant.attributes[n]["max_threads_per_block"], variant.attributes[n]["num_regs"])
            for n in names
        ]

    @staticmethod
    def compile_ms_total() -> float:
        """Milliseconds this process has spent compiling (or loading) fused variants."""
        from .fused_kernels import FusedKernels

        return FusedKernels.compile_ms_total

    # -- one kernel alone (what a benchmark times apart from the step) -----------------------------------
    def launcher(self, name: str) -> Callable[..., None]:
        """Kernel ``name`` of the seven as ``launch(blocks, threads, *args)``, outside any tuner or record."""
        return self._impl[name]

    @property
    def stopwatch(self) -> Any:
        """The backend's stopwatch this solver times its steps with (``mark``, ``elapsed_ms``)."""
        return self._watch

    def limiter_args(self) -> tuple[int, float, float]:
        """The limiter kernels' last three arguments: the limiter's number and the two MUSCL coefficients."""
        return self._limiter, self._c1, self._c2

    # -- time stepping ------------------------------------------------------------------------------------
    def _launch(self, name: str, *args: Any) -> None:
        tuner = self.tuners.get(name)
        blocks, threads = tuner.param if tuner is not None else self.launch[name]
        if tuner is not None:
            tuner.begin()
        if self._record is not None:
            start = self._watch.mark()
        self._impl[name](blocks, threads, *args)
        if self._record is not None:
            self._record.append((name, start, self._watch.mark()))
        if tuner is not None:
            tuner.end()

    def step(self, residuals: bool = False) -> np.ndarray | None:
        """One Runge-Kutta step (all stages). With ``residuals``, returns the L2 norm of R/vol per equation at
        the start of the step (the steady-state residual)."""
        if self.fusion != "none" and self.backend.is_gpu:
            norms = self._step_fused(residuals)
            self.steps_done += 1
            return norms
        nx, ny = self.size
        sch = self.scheme
        norms = None
        n_stages = len(sch.alphas)
        for stage, alpha in enumerate(sch.alphas):
            self._launch("xi_limiter", self.V, self.xip, self.xim, nx, ny, self._limiter, self._c1, self._c2)
            self._launch("eta_limiter", self.V, self.etp, self.etm, nx, ny, self._limiter, self._c1, self._c2)
            self._launch("xi_flux", self.V, self.xip, self.xim, self.sxx, self.sxy, self.F, nx, ny)
            self._launch("eta_flux", self.V, self.etp, self.etm, self.sex, self.sey, self.G, nx, ny)
            self._launch(
                "source", self.xc, self.yc, self.vol, self.mms, self.S, nx * ny, self.setup.source_mode
            )
            self._launch("rhs", self.F, self.G, self.S, self.R, nx, ny)
            if residuals and stage == 0:
                norms = self.residual_norms()
            self._launch(
                "update",
                self.U0,
                self.R,
                self.dt,
                self.vol,
                self.dtv,
                self.V,
                self.sxx,
                self.sxy,
                self.sex,
                self.sey,
                self.bw,
                self.be,
                self.bs,
                self.bn,
                nx,
                ny,
                alpha,
                sch.cfl,
                stage == 0,
                stage == n_stages - 1,
            )
        self.steps_done += 1
        return norms

    # -- fused levels (GPU only; on numpy a fused configuration runs the reference, which is the same
    # arithmetic) ----------------------------------------------------------------------------------------
    def _fused_call(
        self, name: str, grid: tuple[int, int], block: tuple[int, int], shared: int, *args
    ) -> None:
        assert self._variant is not None, "a fused launch before a fused configuration was applied"
        if self._record is not None:
            start = self._watch.mark()
        FusedKernels.launcher(self._variant.functions[name])(grid, block, shared, *args)
        if self._record is not None:
            self._record.append((name, start, self._watch.mark()))

    def _step_fused(self, residuals: bool) -> np.ndarray | None:
        nx, ny = self.size
        sch = self.scheme
        t = self.tile
        bx, by, cx, cy = (t[f"tile.{k}"] for k in ("block_x", "block_y", "cells_x", "cells_y"))
        tx, ty = bx * cx, by * cy
        grid = lambda ex, ey: (-(-ex // tx), -(-ey // ty))  # noqa: E731
        block = (bx, by)
        lim, c1, c2 = self._limiter, self._c1, self._c2
        bounds = (self.bw, self.be, self.bs, self.bn)
        norms = None
        n_stages = len(sch.alphas)
        if self.fusion == "stage" and self._V_next is None:
            # the stage kernel reads its neighbours' state while other blocks write theirs: two buffers, both
            # holding the fixed ghosts of the initial state (the kernel rewrites every other ghost it needs)
            self._V_next = self.V.copy()
        shared = stage_shared_bytes(t)
        for stage, alpha in enumerate(sch.alphas):
            first, last = stage == 0, stage == n_stages - 1
            store_r = bool(residuals and first)
            if self.fusion == "directional":
                self._directional_stage(grid, block, store_r, alpha, first, last)
            else:
                self._fused_call(
                    "stage_fused",
                    grid(nx, ny),
                    block,
                    shared,
                    self.V,
                    self._V_next,
                    self.R,
                    store_r,
                    self.U0,
                    self.dt,
                    self.vol,
                    self.dtv,
                    self.sxx,
                    self.sxy,
                    self.sex,
                    self.sey,
                    *bounds,
                    self.xc,
                    self.yc,
                    self.mms,
                    nx,
                    ny,
                    lim,
                    c1,
                    c2,
                    alpha,
                    sch.cfl,
                    first,
                    last,
                    cx,
                    cy,
                )
                self.V, self._V_next = self._V_next, self.V
            if store_r:
                norms = self.residual_norms()
        return norms

    def _directional_stage(
        self, grid: Any, block: tuple[int, int], store_r: bool, alpha: float, first: bool, last: bool
    ) -> None:
        """The ``directional`` level's three launches of one RK stage: xi faces, eta faces, cell update."""
        nx, ny = self.size
        sch = self.scheme
        cx, cy = self.tile["tile.cells_x"], self.tile["tile.cells_y"]
        lim, c1, c2 = self._limiter, self._c1, self._c2
        bounds = (self.bw, self.be, self.bs, self.bn)
        self._fused_call(
            "xi_face",
            grid(nx + 1, ny),
            block,
            0,
            self.V,
            self.sxx,
            self.sxy,
            self.F,
            nx,
            ny,
            lim,
            c1,
            c2,
            cx,
            cy,
        )
        self._fused_call(
            "eta_face",
            grid(nx, ny + 1),
            block,
            0,
            self.V,
            self.sex,
            self.sey,
            self.G,
            nx,
            ny,
            lim,
            c1,
            c2,
            cx,
            cy,
        )
        self._fused_call(
            "cell_update",
            grid(nx, ny),
            block,
            0,
            self.F,
            self.G,
            self.R,
            store_r,
            self.U0,
            self.dt,
            self.vol,
            self.dtv,
            self.V,
            self.sxx,
            self.sxy,
            self.sex,
            self.sey,
            *bounds,
            self.xc,
            self.yc,
            self.mms,
            nx,
            ny,
            alpha,
            sch.cfl,
            first,
            last,
            cx,
            cy,
        )

    def residual_norms(self) -> np.ndarray:
        xp = self.backend.xp
        r = self.R / self.vol
        return self.backend.asnumpy(xp.sqrt(xp.mean(r * r, axis=(1, 2))))

    def reset(self) -> None:
        """Back to the initial state (same bits every time)."""
        self.V[...] = self._V0
        if self._V_next is not None:
            self._V_next[...] = self._V0
        self.U0[...] = self._U00
        self.steps_done = 0

    # -- timing -------------------------------------------------------------------------------------------
    def timed_step(self) -> tuple[dict[str, float], float]:
        """One step with a mark around every launch: ms per kernel (summed over the stages), ms per step."""
        self._record = []
        start = self._watch.mark()
        try:
            self.step()
        finally:
            records, self._record = self._record, None
        stop = self._watch.mark()
        total = self._watch.elapsed_ms(start, stop)
        per = dict.fromkeys(KERNEL_NAMES if self.fusion == "none" else ALL_TIMED, 0.0)
        for name, a, b in records:
            per[name] += self._watch.elapsed_ms(a, b)
        return per, total

    # -- results ------------------------------------------------------------------------------------------
    def primitives(self) -> np.ndarray:
        """(4, nx, ny) host array of rho, u, v, p with index i along xi first."""
        v = self.backend.asnumpy(self.V[:, 2:-2, 2:-2])
        return np.ascontiguousarray(v.transpose(0, 2, 1))

    def describe(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "size": list(self.size),
            "scheme": asdict(self.scheme),
            "flux": "HLLC with Einfeldt (Roe-averaged) wave speeds",
            "time_stepping": f"{self.scheme.stages}-stage low-storage Runge-Kutta, local time steps",
            "kernels": list(KERNEL_NAMES),
            "backend": self.backend.name,
            "kernel_attributes": self.kernel_attributes,
        }


def _numpy_launcher(name: str):
    fn = getattr(ref, name)

    def launch(blocks: int, threads: int, *args: Any) -> None:
        fn(*args)

    return launch
