"""The CFD solver's tuners: one :class:`~launchtune.kernels.autotune.tuning.Tuning` per kernel, the object
``autotune(...)`` keeps per key, over that kernel's (blocks, threads) of the solver's launch space.

The solver side of the contract is small: ``kernel_names``, ``backend``, ``size``, ``space()`` (with
``<kernel>.blocks`` and ``<kernel>.threads``, whose constraints say what each compiled kernel can launch),
a ``tuners`` dict it reads around each launch (``param``, ``begin()``, ``end()``) and a step counter.
Candidates, the table's picks, a runtime entry locked at once and the table entries written back are the
``Tuning``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

from ..backend import Backend, get_backend
from ..device import describe_device
from ..tuning_table import FILE_NAME, TuningTable, write_entries
from .log import LaunchLog
from .tuner import TunerError
from .tuning import Tuning

MODES = ("off", "scan", "seeded")


def attach_tuners(
    solver: Any,
    mode: str,
    table_path: str | Path | None = None,
    *,
    samples: int | None = None,
    launches_per_sample: int | None = None,
    period: int | None = None,
    period_s: float | None = 300.0,
    period_steps: int | None = None,
    reducer: str = "median",
    time_idle: int = 100,
    seed_count: int = 8,
    log: bool = True,
) -> dict[str, Tuning]:
    """Give ``solver`` one tuning per kernel (``solver.tuners``) and return them.

    ``scan`` tunes over the kernel's whole (blocks, threads) space, the default first; ``seeded`` over the
    tuning table's best ``seed_count`` valid candidates for this GPU class at the nearest size (plus the
    default), or locks at once where the table holds a runtime-tuned entry for exactly this class and size;
    ``off`` attaches none (the solver then launches its default configuration). A sample spans one step's
    launches of the kernel (``solver.scheme.stages`` unless ``launches_per_sample`` says otherwise).
    """
    if mode not in MODES:
        raise TunerError(f"--autotune must be one of {', '.join(MODES)} (got {mode!r})")
    if mode == "off":
        solver.tuners = {}
        return solver.tuners
    # One sample = one solver step's launches of the kernel (its Runge-Kutta stages do different work); such
    # samples already average several launches, so 3 per candidate suffice (5 for one-launch samples).
    if launches_per_sample is None:
        launches_per_sample = int(getattr(getattr(solver, "scheme", None), "stages", 1) or 1)
    if samples is None:
        samples = 5 if launches_per_sample == 1 else 3
    if mode == "seeded":  # every entry's blocks and threads within CUDA's bounds, or one line before a step
        if table_path is None:
            raise TunerError(
                "--autotune seeded needs --tuning-table FILE (a sweep report's or a tuned run's table)"
            )
        TuningTable.load(table_path)
    backend = solver.backend if isinstance(solver.backend, Backend) else get_backend(str(solver.backend))
    device = describe_device(backend)
    step = step_counter(solver)
    launch_log = LaunchLog() if log else None
    space = solver.space()
    tuners: dict[str, Tuning] = {}
    for kernel in solver.kernel_names:
        tuners[kernel] = Tuning(
            kernel,
            space.subspace([f"{kernel}.blocks", f"{kernel}.threads"]),
            gpu_class=device["gpu_class"],
            size=solver.size,
            table=table_path if mode == "seeded" else None,
            seed_count=seed_count,
            scan=None,
            default_first=True,
            info={"device": device.get("device_name", ""), "case": getattr(solver, "case", "")},
            clock=backend.stopwatch(),
            step=step,
            log=launch_log,
            samples=samples,
            launches_per_sample=launches_per_sample,
            period=period,
            period_s=period_s,
            period_steps=period_steps,
            reducer=reducer,
            time_idle=time_idle,
        )
    solver.tuners = tuners
    return tuners


def tuning_summary(tuners: Mapping[str, Tuning]) -> dict[str, Any]:
    """Per kernel: the chosen (blocks, threads), the step tuning finished, launches and time at other params.

    Shares are of the run's kernel time (scan launches all timed, idle ones one in ``time_idle`` and the rest
    counted at their mean), so they compare tuning overhead with the work the tuned kernels did.
    """
    kernels = {}
    for name, tuning in tuners.items():
        s = tuning.stats()
        param = tuning.param_of(s.pop("config")) if s["config"] is not None else None
        kernels[name] = {
            "blocks": param[0] if param else None,
            "threads": param[1] if param else None,
            "default": list(tuning.default),
            **s,
            "nonoptimal_share": s["nonoptimal_ms"] / s["kernel_ms"] if s["kernel_ms"] else 0.0,
        }
    timed = sum(k["kernel_ms"] or 0.0 for k in kernels.values())
    off = sum(k["nonoptimal_ms"] for k in kernels.values())
    excess = sum(k["excess_ms"] or 0.0 for k in kernels.values())
    steps = [k["tuned_at_step"] for k in kernels.values()]
    return {
        "kernels": kernels,
        "kernel_ms": timed,
        "nonoptimal_ms": off,
        "nonoptimal_share": off / timed if timed else 0.0,
        "excess_ms": excess,
        "nonoptimal_launches": sum(k["nonoptimal_launches"] for k in kernels.values()),
        "launches": sum(k["launches"] for k in kernels.values()),
        "all_tuned_at_step": max(steps) if steps and None not in steps else None,
    }


def tuning_files(tuners: Mapping[str, Tuning], keep: int = 8) -> dict[str, Callable[[Path], Any]]:
    """Writers for ``launches.csv`` and ``tuning_table.json`` (this run's tuned values), by file name.

    Shaped for a CLI that writes every output into a temporary folder first and moves them in at the end.
    """
    for tuning in tuners.values():
        tuning.tuner.flush()
    files: dict[str, Callable[[Path], Any]] = {}
    logs = {id(t.tuner.log): t.tuner.log for t in tuners.values() if t.tuner.log is not None}
    if logs:
        (log,) = logs.values()
        files["launches.csv"] = log.write_csv
    entries = [e for e in (t.table_entry(keep) for t in tuners.values()) if e is not None]
    if entries:
        files[FILE_NAME] = lambda path: write_entries(path, entries)
    return files


def save_tuning(tuners: Mapping[str, Tuning], out_dir: str | Path, keep: int = 8) -> dict[str, Path]:
    """Write ``launches.csv`` and ``tuning_table.json`` into ``out_dir``; the paths by what they hold."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = tuning_files(tuners, keep)
    what = {"launches.csv": "launch_log", FILE_NAME: "tuning_table"}
    return {what[name]: Path(write(out_dir / name)) for name, write in files.items()}


def step_counter(solver: Any) -> Callable[[], int]:
    """The solver's steps so far: its counter attribute, else the calls of its ``step()``."""
    for attr in ("steps_done", "step_count", "iteration", "n_steps"):
        if isinstance(getattr(solver, attr, None), int):
            return lambda: int(getattr(solver, attr))
    # No counter on the solver: count calls of its step() (wrapping the bound method on this instance only).
    count = [0]
    inner = solver.step

    def step(*args: Any, **kwargs: Any) -> Hashable:
        count[0] += 1
        return inner(*args, **kwargs)

    solver.step = step
    return lambda: count[0]
