"""Run-time tuning of whole configurations (issue 16): the fused CFD space while the simulation runs.

The fused space's choices (fusion level, 2-D tile, cells per thread, shared memory, faces, register cap) are
not one kernel's launch but one configuration of the whole step, and a stage kernel's tile fixes the work of
every launch in it. So one :class:`~launchtune.kernels.autotune.tuning.Tuning` (the object ``autotune(...)``
and the per-kernel tuners use) chooses among whole configurations over the fused space, and
:class:`WholeTuner` switches the solver's configuration between steps; one sample is one step.

Candidates: ``scan`` draws ``scan_count`` valid configurations of the fused space (seeded) beside the default;
``seeded`` takes the best ``count`` whole configurations a sweep's tuning table ranks for this GPU class (the
nearest size), or locks at once to a tuned run's (``source: runtime``, same size). Without ``arith`` every
candidate keeps the seven kernels' arithmetic (``tile.arith`` pinned to 0), so switching configurations
changes no bit of the answer. A candidate the device refuses (``set_config`` raises: a register-limited block,
say) is dropped and the scan goes on. Every fused variant is compiled (or read from CuPy's cache) before the
first step, so no timed step compiles.
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

from ..device import describe_device
from ..tuning_table import write_entries
from .attach import step_counter
from .tuner import TunerError
from .tuning import Tuning

NAME = "step"  # the tuning's name in logs and summaries


class WholeTuner:
    """Steps ``solver`` at the configuration its tuning asks for; ``step`` stands in for ``solver.step``."""

    def __init__(self, solver: Any, tuning: Tuning, context: dict[str, Any] | None = None):
        self.solver, self.tuning = solver, tuning
        self.current: Hashable | None = None
        self.context = dict(context or {})

    @property
    def tuner(self) -> Any:
        """The state machine (``Autotuner``) under the tuning."""
        return self.tuning.tuner

    def _apply(self) -> None:
        """Set the tuning's configuration on the solver; drop candidates the solver refuses."""
        while self.tuning.param != self.current:
            param = self.tuning.param
            try:
                self.solver.set_config(self.tuning.config)
                self.current = param
            except ValueError as exc:  # cannot run on this device: out of the candidates, never a crash
                self.tuning.reject(str(exc))

    def step(self, residuals: bool = False) -> Any:
        self._apply()
        self.tuning.begin()
        out = self.solver.step(residuals=residuals)
        self.tuning.end()
        return out

    def summary(self) -> dict[str, Any]:
        """The chosen configuration, when it was chosen, and the scan's times of it and of the default."""
        s = self.tuning.stats()
        ranked = dict(self.tuner.ranking())
        default_ms = ranked.get(self.tuning.default)
        return {
            "space": "fused",
            "config": s["config"],
            "default": self.tuning.config_of(self.tuning.default),
            "seed": s["seed"],
            "mode": self.context.get("mode", ""),
            "compile_ms": self.context.get("compile_ms"),
            "state": s["state"],
            "candidates": s["candidates"],
            "rejected": s["rejected"],
            "scans_finished": s["scans_finished"],
            "restored": s["restored"],
            "tuned_at_step": s["tuned_at_step"],
            "best_ms": s["best_ms"],
            # the scan's median step at the default, for orientation only: the speed-up with its interval is
            # benchmarks/autotune_fused.py's interleaved re-measure, not this one-scan reading
            "default_scan_ms": default_ms,
            "nonoptimal_steps": s["nonoptimal_launches"],
            "excess_ms": s["excess_ms"],
        }

    def table_entry(self, keep: int = 8) -> dict[str, Any] | None:
        """This run's result as a tuning-table entry of whole configurations (None before a scan finished)."""
        entry = self.tuning.table_entry(keep)
        return None if entry is None else {**entry, "space": "fused"}

    def write_table(self, path: Path) -> Path | None:
        entry = self.table_entry()
        return None if entry is None else write_entries(path, [entry])


def attach_whole_tuner(
    solver: Any,
    mode: str,
    table_path: str | Path | None = None,
    *,
    samples: int = 3,
    count: int = 8,
    scan_count: int = 32,
    seed: int = 0,
    period_s: float | None = 300.0,
    time_idle: int = 100,
    arith: bool = False,
) -> WholeTuner:
    """A :class:`WholeTuner` over the fused space of ``solver`` (every variant compiled first). ``arith``:
    candidates may use the other arithmetic (``tile.arith`` 1: within 1e-12, not bitwise)."""
    if mode not in ("scan", "seeded"):
        raise TunerError(f"--autotune must be scan or seeded for whole configurations (got {mode!r})")
    if mode == "seeded" and table_path is None:
        raise TunerError(
            "--autotune seeded needs --tuning-table FILE (a fused sweep's or a tuned run's table)"
        )
    before = solver.compile_ms_total()
    space = solver.space("fused")  # compiles every fused variant on a GPU: no timed step compiles
    compile_ms = solver.compile_ms_total() - before
    device = describe_device(solver.backend)
    tuning = Tuning(
        NAME,
        space,
        gpu_class=device["gpu_class"],
        size=solver.size,
        table=table_path if mode == "seeded" else None,
        seed_count=count,
        scan=scan_count + 1,  # the default and scan_count drawn
        seed=seed,
        default_first=True,
        pinned=None if arith else {"tile.arith": 0},
        info={"device": device.get("device_name", "")},
        clock=solver.backend.stopwatch(),
        step=step_counter(solver),
        samples=samples,
        period_s=period_s,
        time_idle=time_idle,
    )
    if mode == "seeded" and not tuning.seeded:
        raise TunerError(
            f"--tuning-table {table_path}: no whole configuration of the fused space for GPU class "
            f"{device['gpu_class']!r} ({tuning.seed.split(';')[0]})"
        )
    return WholeTuner(solver, tuning, {"mode": mode, "compile_ms": round(compile_ms, 1)})
