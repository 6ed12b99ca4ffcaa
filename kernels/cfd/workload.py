"""The CFD workload as the pipeline sees it: ``space()``, ``run()``, ``check()``, ``describe()``.

One object per (case, size, backend). It owns a ``Solver`` whose initial state carries a small seeded
perturbation, so that every timed or checked step exercises the limiters and fluxes everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..space import Space, SpaceError
from ..workload import (
    SEED_MAX,
    Check,
    Timing,
    Workload,
    WorkloadError,
    integer_option,
    number_option,
)
from .cases import CASES
from .fused_kernels import FUSED_KERNELS
from .fused_space import fused_violations
from .launch_space import PRESETS
from .physics import KERNEL_NAMES, LIMITERS
from .solver import Scheme, Solver, parse_size

WORKLOAD_PRESETS = (*PRESETS, "fused")

CHECK_STEPS = 2
ARITH_TOL = 1e-12  # issue 16: a configuration of another arithmetic agrees with the seven kernels to this


def relative_difference(xp: Any, got: Any, want: Any) -> float:
    """The largest ``|got - want|`` of each variable (first axis) over that variable's largest ``|want|``,
    worst variable; ``inf`` where ``got`` is not finite."""
    if not bool(xp.isfinite(got).all()):
        return float("inf")
    axes = tuple(range(1, want.ndim))
    scale = xp.maximum(xp.abs(want).max(axis=axes), np.finfo(np.float64).tiny)
    return float((xp.abs(got - want).max(axis=axes) / scale).max())


class CfdWorkload(Workload):
    @classmethod
    def check_arguments(cls, case: str, size: Any, **options: Any) -> None:
        check_arguments(case, size, **options)

    name = "cfd"
    size: tuple[int, int]  # cells in x and y

    def __init__(
        self,
        case: str,
        size: str | tuple[int, int],
        backend: str = "auto",
        space: str = "paper",
        perturb: float = 0.01,
        seed: int = 0,
        scheme: Scheme | Mapping[str, Any] | None = None,
        smoothing: int = 0,
    ):
        scheme = scheme_from(scheme)
        if case not in CASES:
            raise ValueError(f"unknown cfd case {case!r}: choose one of {', '.join(CASES)}")
        if space not in WORKLOAD_PRESETS:
            raise ValueError(f"unknown space preset {space!r}: choose one of {', '.join(WORKLOAD_PRESETS)}")
        self.case = case
        self.size = parse_size(size)
        self.preset = space
        self.seed = seed
        self.perturb = perturb
        self.solver = Solver(
            case, self.size, backend, scheme=scheme, smoothing=smoothing, perturb=perturb, seed=seed
        )
        self.backend = self.solver.backend
        compiled_before = Solver.compile_ms_total()
        self._space = self.solver.space(space)  # the fused space compiles its variants here, once
        self.build_compile_ms = Solver.compile_ms_total() - compiled_before
        self._reference: tuple[Any, Any] | None = None
        # the fused space times the fused kernels too (zero where a level does not launch them)
        self.kernel_names = KERNEL_NAMES + FUSED_KERNELS if space == "fused" else KERNEL_NAMES
        self._compile_seen = Solver.compile_ms_total()  # build-time compiles are in build_compile_ms

    def space(self) -> Space:
        return self._space

    def _apply(self, config: Mapping[str, int]) -> None:
        # The default configuration is always runnable even where it lies off the preset's value lists.
        self.solver.set_config(self._space.validate(config))

    def run(self, config: Mapping[str, int], repeats: int = 5) -> Timing:
        """Per-kernel and whole-step median milliseconds over ``repeats`` steps after one warm-up step, from
        the same initial state every call (so a sweep's samples all time the same work)."""
        if repeats < 1:
            raise ValueError("repeats must be >= 1")
        self._apply(config)
        s = self.solver
        s.reset()
        s.step()  # warm-up: module load and first-touch costs stay out of the numbers
        per: dict[str, list[float]] = {n: [] for n in self.kernel_names}
        totals = []
        for _ in range(repeats):
            k, t = s.timed_step()
            for n in self.kernel_names:
                per[n].append(k.get(n, 0.0))
            totals.append(t)
        return Timing(
            kernels={n: float(np.median(v)) for n, v in per.items()},
            total=float(np.median(totals)),
            repeats=repeats,
            extra={
                "stages": s.scheme.stages,
                "backend": s.backend.name,
                "unit": "ms per time step",
                "compile_ms": self.take_compile_ms(),
            },
        )

    def take_compile_ms(self) -> float:
        """Milliseconds spent compiling (or loading) fused variants since the last call: the compile cost of
        the configurations checked and run since then, never part of a measured time."""
        total = Solver.compile_ms_total()
        ms, self._compile_seen = total - self._compile_seen, total
        return ms

    def _state_after_steps(self) -> tuple[Any, Any]:
        s = self.solver
        s.reset()
        for _ in range(CHECK_STEPS):
            s.step()
        return s.V.copy(), s.U0.copy()

    def check(self, config: Mapping[str, int]) -> Check:
        """Bitwise equality with the default configuration's state after two steps from the same start; a
        fused configuration with ``tile.arith`` 1 (another rounding) within ``ARITH_TOL`` of it instead, in
        every variable relative to that variable's largest magnitude."""
        xp = self.backend.xp
        if self._reference is None:
            self.solver.set_config(self._space.default)
            self._reference = self._state_after_steps()
        problems = fused_violations(config, self.size, self.solver.device_limits)
        if problems:
            return Check(False, "; ".join(problems))
        try:
            self._apply(config)
        except (ValueError, SpaceError) as e:  # a fused tile the device or the compiled variant cannot run
            return Check(False, str(e))
        V, U0 = self._state_after_steps()
        rv, ru = self._reference
        if not bool(xp.isfinite(rv).all()):
            return Check(False, "the default configuration's own result is not finite")
        if bool(xp.array_equal(V, rv)) and bool(xp.array_equal(U0, ru)):
            return Check(True)
        if int(config.get("fusion", 0)) and int(config.get("tile.arith", 0)):
            worst = max(relative_difference(xp, got, want) for got, want in ((V, rv), (U0, ru)))
            if worst <= ARITH_TOL:
                return Check(True)
            return Check(
                False,
                f"state after {CHECK_STEPS} steps is {worst:.3e} from the default configuration's (relative, "
                f"worst variable), over the {ARITH_TOL:.0e} allowed with tile.arith=1",
            )
        diff = float(xp.abs(V - rv).max())
        return Check(
            False,
            f"state after {CHECK_STEPS} steps differs from the default configuration's "
            f"(max abs difference {diff:.3e})",
        )

    def describe(self) -> dict[str, Any]:
        d = self.solver.describe()
        d.update(
            name=self.name,
            space=self.preset,
            perturb=self.perturb,
            seed=self.seed,
            kernel_names=list(self.kernel_names),
            kernels=list(self.kernel_names),
            build_compile_ms=self.build_compile_ms,
            domain_sizes=self.solver.domain_sizes(),
        )
        return d


def make_workload(
    case: str, size: str | tuple[int, int], backend: str = "auto", **options: Any
) -> CfdWorkload:
    """Registered as ``cfd`` (``pipeline/store/workloads.py``). Options: ``space`` ("paper" or "wide"),
    ``perturb``, ``seed``, ``scheme`` (a ``Scheme``), ``smoothing`` (elliptic grid-smoothing iterations).
    ``space="fused"`` adds ``fusion`` and the fused kernels' ``tile.*`` parameters
    (``kernels/cfd/fused_space.py``)."""
    check_arguments(case, size, **options)
    return CfdWorkload(case, size, backend, **options)


OPTIONS = ("perturb", "scheme", "seed", "smoothing", "space")
# Winslow sweeps of the grid, each a pass over every vertex in numpy before the first step: 10,000 are minutes
# on the largest grids we run and far more than the grid needs to settle; more would only stall the plan.
MAX_SMOOTHING = 10_000
# The initial state's relative perturbation; at 1 or more a density or pressure could reach zero or below.
MAX_PERTURB = 0.5


def scheme_from(value: Scheme | Mapping[str, Any] | None) -> Scheme | None:
    """A ``Scheme``, or a mapping of its fields (a spec's ``options.scheme``), checked field by field
    (``WorkloadError`` naming ``options.scheme.<field>``)."""
    if value is None or isinstance(value, Scheme):
        return value
    if not isinstance(value, Mapping):
        raise WorkloadError(
            f"must be a mapping of {', '.join(SCHEME_FIELDS)} (got {value!r})"[:300], "options.scheme"
        )
    unknown = [k for k in value if k not in SCHEME_FIELDS]
    if unknown:
        raise WorkloadError(
            f"unknown field {unknown[0]!r} (known: {', '.join(SCHEME_FIELDS)})"[:300],
            f"options.scheme.{unknown[0]}",
        )
    d = Scheme()
    limiter = value.get("limiter", d.limiter)
    if not isinstance(limiter, str) or limiter not in LIMITERS:
        raise WorkloadError(
            f"must be one of {', '.join(LIMITERS)} (got {limiter!r})"[:300], "options.scheme.limiter"
        )
    try:
        return Scheme(
            kappa=number_option(value, "kappa", d.kappa, -1.0, 1.0),
            epsilon=number_option(value, "epsilon", d.epsilon, 0.0, 1.0),
            limiter=limiter,
            cfl=number_option(value, "cfl", d.cfl, 1e-6, 10.0),
            stages=integer_option(value, "stages", d.stages, 1, 6),
        )
    except WorkloadError as exc:
        raise WorkloadError(str(exc), exc.field.replace("options.", "options.scheme.")) from None


SCHEME_FIELDS = ("kappa", "epsilon", "limiter", "cfl", "stages")


def check_arguments(case: str, size: str | tuple[int, int], **options: Any) -> None:
    """The case, size, option names, types and ranges and the space preset, checked without building
    anything (``CfdWorkload.check_arguments``); raises ``WorkloadError`` naming the field."""
    unknown = [k for k in options if k not in OPTIONS]
    if unknown:
        raise WorkloadError(
            f"unknown cfd workload option {unknown[0]!r} (known: {', '.join(OPTIONS)})",
            f"options.{unknown[0]}",
        )
    if case not in CASES:
        raise WorkloadError(f"unknown cfd case {case!r}: choose one of {', '.join(CASES)}", "case")
    integer_option(options, "seed", 0, 0, SEED_MAX)
    integer_option(options, "smoothing", 0, 0, MAX_SMOOTHING)
    number_option(options, "perturb", 0.01, 0.0, MAX_PERTURB)
    scheme_from(options.get("scheme"))
    space = options.get("space", "paper")
    if not isinstance(space, str) or space not in WORKLOAD_PRESETS:
        raise WorkloadError(
            f"unknown space preset {space!r}: choose one of {', '.join(WORKLOAD_PRESETS)}", "options.space"
        )
    try:
        parse_size(size)
    except ValueError as exc:
        raise WorkloadError(str(exc), "size") from None
