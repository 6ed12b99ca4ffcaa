"""Wiring tuners into a solver: one Autotuner per kernel, its candidates, the table that seeds it, a summary.

The solver side of the contract is small: ``kernel_names``, ``backend``, ``size``, ``space()`` (with
``<kernel>.blocks`` and ``<kernel>.threads``), a ``tuners`` dict it reads around each launch, ``step()``, and
the compiled kernels' max threads per block. Everything tuning-specific lives here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

from launchtune.kernels.autotune.log import LaunchLog
from launchtune.kernels.autotune.table import RUNTIME, Entry, TuningTable, size_key
from launchtune.kernels.autotune.tuner import Autotuner, TunerError
from launchtune.kernels.backend import Backend, get_backend
from launchtune.kernels.device import describe_device

MODES = ("off", "scan", "seeded")
Param = tuple[int, int]  # (blocks, threads)


def fit_candidates(candidates: Iterable[Param], max_threads: int | None, policy: str = "drop") -> list[Param]:
    """Candidates a kernel can launch: threads over its max threads per block dropped (or clamped, as HOOMD).

    Dropping keeps every logged parameter one that really ran; if dropping would leave nothing, clamp instead
    (to the largest multiple of 32 within the limit), so a tuner always has something to run.
    """
    cands = list(dict.fromkeys(candidates))
    if not max_threads:
        return cands
    if policy not in ("drop", "clamp"):
        raise TunerError(f"policy must be 'drop' or 'clamp' (got {policy!r})")
    kept = [c for c in cands if c[1] <= max_threads]
    if policy == "drop" and kept:
        return kept
    cap = max(32, max_threads // 32 * 32) if max_threads >= 32 else max_threads
    return list(dict.fromkeys((b, t if t <= max_threads else cap) for b, t in cands))


def space_candidates(space: Any, kernel: str) -> tuple[Param, list[Param]]:
    """The default (blocks, threads) of ``kernel`` and every valid pair of the space, default first."""
    kb, kt = f"{kernel}.blocks", f"{kernel}.threads"
    sub = space.subspace([kb, kt])
    default = (int(space.default[kb]), int(space.default[kt]))
    grid = [(int(b), int(t)) for b, t in itertools.product(space[kb].values, space[kt].values)]
    return default, [default] + [c for c in grid if sub.is_valid({kb: c[0], kt: c[1]})]


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
    policy: str = "drop",
    log: bool = True,
) -> dict[str, Autotuner]:
    """Give ``solver`` one tuner per kernel (``solver.tuners``) and return them.

    ``scan`` tunes over the kernel's whole (blocks, threads) space; ``seeded`` over the tuning table's best
    ``seed_count`` candidates for this GPU class and size (plus the default), or locks at once where the
    table holds a runtime-tuned entry for exactly this class, size and kernel; ``off`` attaches none (the
    solver then launches its default configuration). A sample spans one step's launches of the kernel
    (``solver.scheme.stages`` unless ``launches_per_sample`` says otherwise).
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
    if mode == "seeded" and table_path is None:
        raise TunerError(
            "--autotune seeded needs --tuning-table FILE (a sweep report's or a tuned run's table)"
        )
    table = TuningTable.load(table_path) if mode == "seeded" else None
    backend = solver.backend if isinstance(solver.backend, Backend) else get_backend(str(solver.backend))
    device = describe_device(backend)
    size = size_key(solver.size)
    step = _step_counter(solver)
    launch_log = LaunchLog() if log else None
    space = solver.space()
    tuners: dict[str, Autotuner] = {}
    for kernel in solver.kernel_names:
        default, full = space_candidates(space, kernel)
        limit = _max_threads(solver, kernel)
        full = fit_candidates(full, limit, policy)
        entry = table.lookup(device["gpu_class"], size, kernel) if table is not None else None
        cands, seed, restored = full, "none: full scan", None
        if entry is not None and entry.source == RUNTIME and entry.size == size:
            restored = fit_candidates(entry.params[:1], limit, policy)[0]
            cands = fit_candidates([restored, *full], limit, policy)  # what a later re-scan covers
            seed = f"locked from {RUNTIME} {entry.gpu_class} {entry.size}"
        elif entry is not None:
            cands = fit_candidates([default, *entry.params[:seed_count]], limit, policy)
            seed = f"{entry.source} {entry.gpu_class} {entry.size}"
        tuner = Autotuner(
            kernel,
            cands,
            samples=samples,
            launches_per_sample=launches_per_sample,
            period=period,
            period_s=period_s,
            period_steps=period_steps,
            reducer=reducer,
            time_idle=time_idle,
            clock=backend.stopwatch(),
            step=step,
            log=launch_log,
        )
        if restored is not None:
            tuner.lock(restored)
        tuner.context = {
            "gpu_class": device["gpu_class"],
            "size": size,
            "device": device.get("device_name", ""),
            "default": default,
            "max_threads": limit,
            "seed": seed,
            "mode": mode,
            "case": getattr(solver, "case", ""),
        }
        tuners[kernel] = tuner
    solver.tuners = tuners
    return tuners


def tuning_summary(tuners: Mapping[str, Autotuner]) -> dict[str, Any]:
    """Per kernel: the chosen (blocks, threads), the step tuning finished, launches and time at other params.

    Shares are of the run's kernel time (scan launches all timed, idle ones one in ``time_idle`` and the rest
    counted at their mean), so they compare tuning overhead with the work the tuned kernels did.
    """
    kernels = {}
    for name, tuner in tuners.items():
        s = tuner.stats()
        default = tuner.context.get("default")
        kernels[name] = {
            "blocks": s["param"][0] if s["param"] else None,
            "threads": s["param"][1] if s["param"] else None,
            "default": list(default) if default else None,
            "seed": tuner.context.get("seed", ""),
            **{k: v for k, v in s.items() if k != "param"},
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


def tuning_files(tuners: Mapping[str, Autotuner], keep: int = 8) -> dict[str, Callable[[Path], Any]]:
    """Writers for ``launches.csv`` and ``tuning_table.json`` (this run's tuned values), by file name.

    Shaped for a CLI that writes every output into a temporary folder first and moves them in at the end.
    """
    for tuner in tuners.values():
        tuner.flush()
    files: dict[str, Callable[[Path], Any]] = {}
    logs = {id(t.log): t.log for t in tuners.values() if t.log is not None}
    if logs:
        (log,) = logs.values()
        files["launches.csv"] = log.write_csv
    entries = [e for e in (table_entry(n, t, keep) for n, t in tuners.items()) if e is not None]
    if entries:
        files["tuning_table.json"] = TuningTable(entries).save
    return files


def save_tuning(
    tuners: Mapping[str, Autotuner],
    out_dir: str | Path,
    table_path: str | Path | None = None,
    keep: int = 8,
) -> dict[str, Path]:
    """Write ``launches.csv`` and the tuned table (``tuning_table.json`` in ``out_dir``, or ``table_path``).

    A table file already at ``table_path`` is merged into (this run's entries replace those of the same key),
    so one file can collect tuned values over sizes and GPU classes.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = tuning_files(tuners, keep)
    written: dict[str, Path] = {}
    if "launches.csv" in files:
        written["launch_log"] = files["launches.csv"](out_dir / "launches.csv")
    target = Path(table_path) if table_path else out_dir / "tuning_table.json"
    entries = [e for e in (table_entry(n, t, keep) for n, t in tuners.items()) if e is not None]
    if entries:
        table = TuningTable.load(target) if target.exists() else TuningTable()
        for e in entries:
            table.add(e)
        written["tuning_table"] = table.save(target)
    return written


def table_entry(name: str, tuner: Autotuner, keep: int = 8) -> Entry | None:
    """This tuner's result as a runtime table entry (None before its first scan finished or a lock)."""
    ctx = tuner.context
    if "gpu_class" not in ctx or not tuner.scans:
        return None
    ranked = tuner.ranking()
    best = tuner.scans[-1]["best"] if tuner.state == "idle" else (ranked[0][0] if ranked else None)
    if best is None:
        return None
    rows = [{"blocks": int(p[0]), "threads": int(p[1]), "time_ms": round(ms, 6)} for p, ms in ranked[:keep]]
    if not rows or (rows[0]["blocks"], rows[0]["threads"]) != tuple(best):
        rows.insert(0, {"blocks": int(best[0]), "threads": int(best[1])})
    return Entry(
        ctx["gpu_class"],
        ctx["size"],
        name,
        rows,
        RUNTIME,
        {
            "device": ctx.get("device", ""),
            "case": ctx.get("case", ""),
            "samples": tuner.samples,
            "reducer": tuner.reducer,
        },
    )


def _max_threads(solver: Any, kernel: str) -> int | None:
    limit = getattr(solver, "max_threads_per_block", None)
    if callable(limit):
        limit = limit(kernel)
    elif isinstance(limit, Mapping):
        limit = limit.get(kernel)
    return int(limit) if limit else None


def _step_counter(solver: Any) -> Callable[[], int]:
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
