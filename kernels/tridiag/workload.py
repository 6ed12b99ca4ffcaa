"""The ``tridiag`` workload: the partition solver on one system, end to end (host -> device -> host).

``size`` is the number of unknowns. Cases: ``random`` (random strictly diagonally dominant, seeded) and
``heat`` (one implicit step of the 1-D heat equation). Launch space: ``streams`` (1..32, powers of two),
``threads`` per block, the sub-system size ``m``; ``stage2``, where the interface system is solved (0 =
``host``, the seed's; 1 = ``gpu``, on the device: numeric so the surrogates can use it; ``"host"`` and
``"gpu"`` are accepted too); ``copies``, how the chunks' copies and kernels are issued (an index into
``system.COPY_CHOICES``: 0 = ``streams``, one stream per chunk, the seed's; 1 = ``ordered``, 2 = ``streamed``,
3 = ``spike``, the pipelines of issue 21, which need stage 2 on the device); ``ends``, the first and last
chunk's share of an inner one in % (100, 50, 25; below 100 for ``streamed`` and ``spike`` only); the default
(what a user gets untuned) is the seed's 1 stream, 256 threads, m = 10, stage 2 on the host, one stream per
chunk. ``run`` reports, in ``Timing.kernels``, the seven stage times of the serial (one-stream) pipeline with
the same ``threads`` and ``m`` (what the seed's stream model needs), and in ``Timing.total`` the end-to-end
time under the configuration's stream count.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..backend import get_backend
from ..space import Constraint, Param, Space
from ..workload import SEED_MAX, Check, Timing, Workload, WorkloadError, integer_option
from . import partition, reference
from .cuda_solver import CudaPartitionSolver, empty_pinned, max_threads
from .reduced import solve_reduced
from .system import (
    COPY_CHOICES,
    STAGE2_CHOICES,
    STREAM_CHOICES,
    TridiagError,
    check_m,
    check_streams,
    chunk_bounds,
    heat_system,
    parse_size,
    random_system,
    residual,
)

CASES = ("random", "heat")
THREADS = (32, 64, 128, 256, 512, 1024)
M_VALUES = (4, 6, 8, 10, 12, 16, 24, 32)
DEFAULT = {"streams": 1, "threads": 256, "m": 10, "stage2": 0, "copies": 0, "ends": 100}
ENDS_PERCENT = (100, 50, 25)  # the end chunks' share of an inner chunk, % (system.chunk_bounds)
STAGES = ("t1_h2d", "t1_comp", "t1_d2h", "t2_host", "t3_h2d", "t3_comp", "t3_d2h")
RESIDUAL_TOL = 1e-12
AGREE_TOL = 1e-11


class TridiagWorkload(Workload):
    @classmethod
    def check_arguments(cls, case: str, size: Any, **options: Any) -> None:
        check_arguments(case, size, **options)

    name = "tridiag"

    def __init__(self, case: str, n: int, backend: str = "auto", seed: int = 0):
        if case not in CASES:
            raise TridiagError(f"unknown tridiag case {case!r}: choose one of {', '.join(CASES)}")
        self.case, self.n, self.seed = case, n, seed
        self.size = (n,)
        self.backend = get_backend(backend)
        if self.backend.is_gpu:  # pinned, so uploads are DMA at full rate and async
            self.abcd = empty_pinned(self.backend.xp, (4, n))
        else:
            self.abcd = np.empty((4, n))
        if case == "random":
            random_system(n, seed=seed, out=self.abcd)
        else:
            heat_system(n, seed=seed, out=self.abcd)
        self._solver: Any = None
        self._stage_cache: dict[tuple[int, int, int, str, str], dict[str, float]] = {}
        self._ref: np.ndarray | None = None

    # -- the interface ---------------------------------------------------------------------------------------
    def space(self) -> Space:
        constraints: tuple[Constraint, ...] = (
            Constraint(
                "copies other than streams (0) need stage 2 on the device (stage2=1)",
                lambda c: int(c["copies"]) == 0 or int(c["stage2"]) == 1,
                lambda cols: (cols["copies"] == 0) | (cols["stage2"] == 1),
                ("stage2", "copies"),
            ),
            Constraint(
                "end chunks below 100% apply to copies streamed (2) and spike (3) only",
                lambda c: int(c["ends"]) == 100 or int(c["copies"]) in (2, 3),
                lambda cols: (cols["ends"] == 100) | np.isin(cols["copies"], (2, 3)),
                ("copies", "ends"),
            ),
        )
        if self.backend.is_gpu:
            cp = self.backend.xp
            constraints += (
                Constraint(
                    "threads exceeds the compiled kernel's max threads per block for this m",
                    lambda c: int(c["threads"]) <= max_threads(cp, int(c["m"])),
                ),
            )
        params = (
            Param("streams", STREAM_CHOICES),
            Param("threads", THREADS),
            Param("m", M_VALUES),
            Param("stage2", tuple(range(len(STAGE2_CHOICES)))),
            Param("copies", tuple(range(len(COPY_CHOICES)))),
            Param("ends", ENDS_PERCENT),
        )
        return Space(params, dict(DEFAULT), constraints, name=f"tridiag[{self.case},{self.n}]")

    def run(self, config: Mapping[str, int | str], repeats: int = 5) -> Timing:
        streams, threads, m, stage2, copies, ends = self._config(config)
        repeats = max(1, int(repeats))
        stages = self.stage_times(threads, m, repeats, stage2)
        self._solve(streams, threads, m, stage2, copies, ends)  # warm-up
        runs = [self._solve(streams, threads, m, stage2, copies, ends) for _ in range(repeats)]
        med = {k: float(np.median([r[k] for r in runs])) for k in runs[0]}
        extra = {
            "total_1stream": stages["total"],
            "stage1_span": med.get("stage1", float("nan")),
            "host_span": med.get("host", float("nan")),
            "stage2_span": med.get("host", float("nan")),
            "stage2": stage2,
            "copies": copies,
            "ends": ends,
            "stage3_span": med.get("stage3", float("nan")),
            "backend": self.backend.name,
            "host_solver": self._host_solver_name(stage2),
            "host_threads": self._host_threads(stage2),
            "total_min": float(min(r["total"] for r in runs)),
            "total_max": float(max(r["total"] for r in runs)),
            "host_span_max": float(max(r.get("host", float("nan")) for r in runs)),
        }
        return Timing(
            kernels={k: stages[k] for k in STAGES}, total=med["total"], repeats=repeats, extra=extra
        )

    def check(self, config: Mapping[str, int | str]) -> Check:
        streams, threads, m, stage2, copies, ends = self._config(config)
        try:
            x = self.solve(streams, threads, m, stage2, copies, ends)
        except (ArithmeticError, TridiagError) as exc:
            return Check(False, str(exc))
        if not np.all(np.isfinite(x)):
            return Check(False, "non-finite unknowns in the solution")
        res = residual(self.abcd, x)
        if not res < RESIDUAL_TOL:
            return Check(False, f"residual {res:.3e} >= {RESIDUAL_TOL:g}")
        ref = self.reference()
        diff = float(np.linalg.norm(x - ref) / max(float(np.linalg.norm(ref)), 1e-300))
        if not diff < AGREE_TOL:
            return Check(False, f"differs from the numpy reference by {diff:.3e} (relative)")
        return Check(True, f"residual {res:.2e}, relative difference to reference {diff:.2e}")

    def describe(self) -> dict[str, Any]:
        return {
            "workload": self.name,
            "case": self.case,
            "size": self.n,
            "seed": self.seed,
            "backend": self.backend.name,
            "bytes_in": 32 * self.n,
            "bytes_out": 8 * self.n,
        }

    # -- beyond the interface --------------------------------------------------------------------------------
    def solve(
        self,
        streams: int = 1,
        threads: int = 256,
        m: int = 10,
        stage2: str = "host",
        copies: str = "streams",
        ends: int = 100,
    ) -> np.ndarray:
        """A fresh copy of the solution under one configuration (output poisoned first)."""
        stage2 = _stage2_name(stage2)
        if self.backend.is_gpu:
            solver = self.gpu_solver(threads, m, stage2, copies, ends)
            solver.x_host.fill(np.nan)
            solver.solve(check_streams(streams))
            return np.array(solver.x_host)
        return reference.solve(self.abcd, check_m(m), check_streams(streams), stage2)

    def reference(self) -> np.ndarray:
        """The numpy partition method's solution with the default ``m`` (the same algorithm, on the host),
        computed once: every configuration's answer, whatever its ``m``, must agree with it to ``AGREE_TOL``.
        (Cached per ``m`` before, and only the last one kept: at 10^7 unknowns a sweep recomputed it for
        nearly every configuration, 3 s each, 19 configurations a minute on the H100.)"""
        if self._ref is None:
            self._ref = reference.solve(self.abcd, DEFAULT["m"], 1)
        return self._ref

    def stage_times(
        self,
        threads: int = 256,
        m: int = 10,
        repeats: int = 5,
        stage2: str = "host",
        copies: str = "streams",
    ) -> dict[str, float]:
        """Median stage times (``STAGES``, ``total``) of the one-stream pipeline, each stage's median over
        ``repeats`` solves after a warm-up, cached per (threads, m, repeats, stage2, copies).

        ``copies="spike"``: the SPIKE pipeline's, from its traced critical chain (``spike_stage_times``); the
        seed's stage boundaries do not exist in it. Any other ``copies``: the seed's pipeline
        (``CudaPartitionSolver.solve(detail=True)`` runs it whatever the copies, so ``ordered`` and
        ``streamed`` get its stage times).
        """
        stage2, copies = _pipeline(stage2, copies)
        key = (threads, m, repeats, stage2, copies)
        if key not in self._stage_cache:
            self._one_stream_stages(threads, m, stage2, copies)
            runs = [self._one_stream_stages(threads, m, stage2, copies) for _ in range(repeats)]
            self._stage_cache[key] = {k: float(np.median([r[k] for r in runs])) for k in (*STAGES, "total")}
        return self._stage_cache[key]

    def _one_stream_stages(self, threads: int, m: int, stage2: str, copies: str) -> dict[str, float]:
        """One solve at one stream: its seven stage times and ``total`` (``stage_times``)."""
        if copies != "spike" or not self.backend.is_gpu:  # numpy: every pipeline is one
            return self._solve(1, threads, m, stage2, copies, detail=True)
        solver = self.gpu_solver(threads, m, stage2, copies)
        solver.trace = True
        try:
            return spike_stage_times(solver.solve(1))
        finally:
            solver.trace = False

    def _config(self, config: Mapping[str, int | str]) -> tuple[int, int, int, str, str, int]:
        unknown = sorted(set(config) - set(DEFAULT))
        if unknown:
            raise TridiagError(f"unknown tridiag parameter {unknown[0]!r} (known: {', '.join(DEFAULT)})")
        cfg = {**DEFAULT, **config}
        stage2, copies = _pipeline(cfg.pop("stage2"), cfg.pop("copies"))
        n = {k: int(v) for k, v in cfg.items()}  # the whole-number parameters
        if n["threads"] <= 0:
            raise TridiagError(f"threads={n['threads']} must be positive")
        if n["ends"] not in ENDS_PERCENT:
            raise TridiagError(f"ends={n['ends']} must be one of {', '.join(map(str, ENDS_PERCENT))} (%)")
        if n["ends"] != 100 and copies not in ("streamed", "spike"):
            raise TridiagError(f"ends={n['ends']} (below 100%) applies to copies streamed and spike only")
        return check_streams(n["streams"]), n["threads"], check_m(n["m"]), stage2, copies, n["ends"]

    def gpu_solver(
        self, threads: int, m: int, stage2: str = "host", copies: str = "streams", ends: int = 100
    ) -> Any:
        """The ``CudaPartitionSolver`` this workload solves with on a GPU, set to these parameters (built on
        first use and again when ``m`` changes; ``ends`` in % of an inner chunk, as in the space)."""
        if self._solver is None or self._solver.m != m:
            self._solver = None  # free the old device buffers before allocating new ones
            self._solver = CudaPartitionSolver(
                self.backend.xp, self.abcd, m=m, threads=threads, stage2=stage2
            )
        else:
            self._solver.set_threads(threads)
            self._solver.set_stage2(stage2)
        self._solver.set_copies(copies)
        self._solver.set_ends(ends / 100)  # % of an inner chunk, as in the space
        return self._solver

    def _host_solver_name(self, stage2: str) -> str:
        if stage2 == "gpu":
            return "device-pcr"
        return self._solver.host_solver.name if self.backend.is_gpu else "lapack-dgtsv"

    def _host_threads(self, stage2: str) -> int:
        if stage2 == "gpu" or not self.backend.is_gpu:
            return 0 if stage2 == "gpu" else 1
        return int(self._solver.host_solver.threads)

    def _solve(
        self,
        streams: int,
        threads: int,
        m: int,
        stage2: str = "host",
        copies: str = "streams",
        ends: int = 100,
        detail: bool = False,
    ) -> dict[str, float]:
        if self.backend.is_gpu:
            return self.gpu_solver(threads, m, stage2, copies, ends).solve(streams, detail=detail)
        return _timed_numpy(self.abcd, m, streams, stage2)  # no copies on the CPU: every pipeline is one


def _choice_name(name: str, value: int | str, choices: tuple[str, ...]) -> str:
    """A choice by its name or its index in ``choices`` (numeric in the sweep, so surrogates can use it);
    anything else a ``TridiagError`` naming both forms."""
    if isinstance(value, str) and value in choices:
        return value
    if not isinstance(value, bool) and isinstance(value, int | np.integer) and 0 <= value < len(choices):
        return choices[int(value)]
    listed = ", ".join(f"{c} ({i})" for i, c in enumerate(choices))
    raise TridiagError(f"{name}={value!r} must be one of {listed}")


def _stage2_name(stage2: int | str) -> str:
    """``0``/``"host"`` -> ``"host"``, ``1``/``"gpu"`` -> ``"gpu"``; anything else a ``TridiagError``."""
    return _choice_name("stage2", stage2, STAGE2_CHOICES)


def _pipeline(stage2: int | str, copies: int | str) -> tuple[str, str]:
    """``(stage2, copies)`` by name, checked: every ``copies`` but ``streams`` needs stage 2 on the device."""
    stage2 = _stage2_name(stage2)
    copies = _choice_name("copies", copies, COPY_CHOICES)
    if copies != "streams" and stage2 != "gpu":
        raise TridiagError(f"copies={copies!r} needs stage 2 on the device (stage2='gpu')")
    return stage2, copies


SPIKE_TRACE = ("total", "stage1", "stage2", "at_uploaded", "at_first_back")


def spike_stage_times(trace: Mapping[str, float]) -> dict[str, float]:
    """The seed's seven stage times (``STAGES``) and ``total`` of one SPIKE solve at one chunk, from the
    solve's trace (``CudaPartitionSolver.trace``: ms from the start to each step of the critical chain).

    ``solve(detail=True)`` marks the seed pipeline's stage boundaries, which the SPIKE pipeline does not have
    (``_solve_chained``): it copies the four rows up, reduces them (stage 1 and the slices' spikes in one
    kernel), solves the top system, goes back down (the slices' interface values and stage 3 in one kernel)
    and copies the unknowns down; the interface system never leaves the device. At one chunk all of it is
    one chain on one stream, so the trace splits ``total`` into the seed's stages:

    * ``t1_h2d = at_uploaded``: the rows up (the error flag's reset runs beside them);
    * ``t1_comp = stage1 - at_uploaded``: the reduction (the stage-1 span ends at the event recorded right
      after it: ``at_last_reduced`` but for the wait on the other chunks' reductions, none at one chunk);
    * ``t1_d2h = 0`` and ``t3_h2d = 0``: no interface rows cross the bus;
    * ``t2_host = stage2``: the top solve, on the device (the seed's stage 2 ran on the host);
    * ``t3_comp = at_first_back - (stage1 + stage2)``: the way back;
    * ``t3_d2h = total - at_first_back``: the unknowns down (the error flag's copy runs beside the way back).

    They add up to ``total``. At more than one chunk the ``at_`` times are the last chunk's reduction and the
    first chunk's way back, not stages: this needs the one-chunk trace. A trace without one of
    ``SPIKE_TRACE`` (the seed pipeline's, or ``trace`` off) is a ``TridiagError``.
    """
    missing = [k for k in SPIKE_TRACE if k not in trace]
    if missing:
        raise TridiagError(
            f"not a traced SPIKE solve: no {missing[0]!r} (needs {', '.join(SPIKE_TRACE)}; set the solver's "
            "trace, copies 'spike' and stage 2 'gpu')"
        )
    total, stage1, stage2 = float(trace["total"]), float(trace["stage1"]), float(trace["stage2"])
    uploaded, first_back = float(trace["at_uploaded"]), float(trace["at_first_back"])
    return {
        "t1_h2d": uploaded,
        "t1_comp": stage1 - uploaded,
        "t1_d2h": 0.0,
        "t2_host": stage2,
        "t3_h2d": 0.0,
        "t3_comp": first_back - (stage1 + stage2),
        "t3_d2h": total - first_back,
        "total": total,
    }


def _timed_numpy(abcd: np.ndarray, m: int, streams: int, stage2: str = "host") -> dict[str, float]:
    """The numpy pipeline with host-clock stage times (no transfers on the CPU: those stages are 0)."""

    t0 = time.perf_counter()
    blocks = partition.padded_blocks(abcd, m)
    p = blocks.shape[1]
    chunks = chunk_bounds(p, streams)
    iface = np.empty((4, 2 * p))
    for s, e in chunks:
        iface[:, 2 * s : 2 * e] = partition.stage1(blocks[:, s:e])
    t1 = time.perf_counter()

    z = solve_reduced(iface) if stage2 == "gpu" else partition.stage2(iface)
    t2 = time.perf_counter()
    x = np.empty((p, m))
    for s, e in chunks:
        x[s:e] = partition.stage3(blocks[:, s:e], z[2 * s : 2 * e])
    t3 = time.perf_counter()
    ms = 1e3
    out = dict.fromkeys(STAGES, 0.0)
    out.update(
        t1_comp=(t1 - t0) * ms,
        t2_host=(t2 - t1) * ms,
        t3_comp=(t3 - t2) * ms,
        total=(t3 - t0) * ms,
        stage1=(t1 - t0) * ms,
        host=(t2 - t1) * ms,
        stage3=(t3 - t2) * ms,
        stage2=(t2 - t1) * ms,
    )
    return out


def make_workload(
    case: str = "random", size: int | str | tuple[int, ...] = 100_000, backend: str = "auto", **options: Any
) -> TridiagWorkload:
    """``make_workload("random", "1e6", "numpy", seed=1)``; options: ``seed``."""
    check_arguments(case, size, **options)
    return TridiagWorkload(case, parse_size(size), backend, seed=int(options.get("seed", 0)))


class ArgumentError(TridiagError, WorkloadError):
    """A tridiag case, size or option that does not exist: a ``TridiagError`` and a ``WorkloadError``."""


def check_arguments(case: str, size: int | str | tuple[int, ...], **options: Any) -> None:
    """The case, size and option names, checked without building anything
    (``TridiagWorkload.check_arguments``); raises ``ArgumentError`` naming the field."""
    unknown = [k for k in options if k != "seed"]
    if unknown:
        raise ArgumentError(f"unknown tridiag option {unknown[0]!r} (known: seed)", f"options.{unknown[0]}")
    if case not in CASES:
        raise ArgumentError(f"unknown tridiag case {case!r}: choose one of {', '.join(CASES)}", "case")
    try:
        parse_size(size)
        integer_option(options, "seed", 0, 0, SEED_MAX)
    except TridiagError as exc:
        raise ArgumentError(str(exc), "size") from None
    except WorkloadError as exc:
        raise ArgumentError(str(exc), exc.field) from None
