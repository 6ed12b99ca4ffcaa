"""Run-time tuning of whole configurations (issue 16): the fused CFD space while the simulation runs.

The fused space's choices (fusion level, 2-D tile, cells per thread, shared memory, faces, register cap) are
not one kernel's launch but one configuration of the whole step, and a stage kernel's tile fixes the work of
every launch in it. So one :class:`~kernels.autotune.tuner.Autotuner` (the state machine of the per-kernel
tuners: startup scan, lock, re-scan after a period) chooses among whole configurations, and
:class:`WholeTuner` switches the solver's configuration between steps; one sample is one step.

Candidates: ``scan`` draws ``scan_count`` valid configurations of the fused space (seeded) beside the default;
``seeded`` takes the best ``count`` whole configurations a sweep's tuning table ranks for this GPU class (the
nearest size), or locks at once to a tuned run's (``source: runtime``, same size). A candidate the device
refuses (``set_config`` raises: a register-limited block, say) is dropped and the scan goes on. Every fused
variant is compiled (or read from CuPy's cache) before the first step, so no timed step compiles.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any, cast

from launchtune.kernels.atomic import write_text
from launchtune.kernels.autotune.table import (
    FORMAT,
    RUNTIME,
    TableError,
    _cells,
    _is_int,
    read_table_doc,
    size_key,
)
from launchtune.kernels.autotune.tuner import IDLE, Autotuner, TunerError
from launchtune.kernels.device import describe_device

NAME = "step"  # the tuner's name in logs and summaries
Key = tuple[tuple[str, int], ...]


def as_config(key: Hashable) -> dict[str, int]:
    """A candidate back as a configuration."""
    return dict(cast(Key, key))


def config_key(config: Mapping[str, Any]) -> Key:
    """A configuration as a hashable candidate (sorted items)."""
    return tuple(sorted((str(k), int(v)) for k, v in config.items()))


def table_configurations(
    path: str | Path, gpu_class: str, size: str
) -> tuple[list[dict[str, int]], str, str]:
    """The whole configurations a tuning table ranks for ``gpu_class`` (best first), its source and size.

    Entries without ``kernel`` hold whole configurations (``best``, ``candidates``, ``configs``, ``config``);
    of this class's entries the one at ``size`` is taken, else the nearest by cell count (as ``lookup``).
    Returns ``([], "", "")`` where the table has none for the class.
    """
    doc = read_table_doc(Path(path))
    entries = [e for e in doc["entries"] if isinstance(e, Mapping) and "kernel" not in e]
    mine = [e for e in entries if e.get("gpu_class") == gpu_class and isinstance(e.get("size"), str)]
    if not mine:
        return [], "", ""

    def distance(e: Mapping[str, Any]) -> float:
        here, there = _cells(size), _cells(size_key(e["size"]))
        return abs(math.log(there) - math.log(here)) if here > 0 and there > 0 else math.inf

    entry = min(mine, key=distance)
    raw: list[Any] = [entry["best"]] if isinstance(entry.get("best"), Mapping) else []
    for part in ("candidates", "configs"):
        items = entry.get(part) or []
        if not isinstance(items, list):
            raise TableError(f"{path}: entry {gpu_class} {entry['size']}: '{part}' must be a list")
        raw += [i.get("config", i) if isinstance(i, Mapping) else i for i in items]
    if isinstance(entry.get("config"), Mapping):
        raw.append(entry["config"])
    configs, seen = [], set()
    for j, config in enumerate(raw):
        if not isinstance(config, Mapping) or not all(_is_int(v) for v in config.values()):
            where = f"{path}: entry {gpu_class} {entry['size']}"
            raise TableError(f"{where}: configuration {j} is not an object of name -> integer")
        key = config_key(config)
        if key not in seen:
            seen.add(key)
            configs.append(dict(key))
    return configs, str(entry.get("source", "sweep")), size_key(entry["size"])


def whole_candidates(
    space: Any,
    mode: str,
    table_path: str | Path | None,
    gpu_class: str,
    size: str,
    *,
    count: int = 8,
    scan_count: int = 32,
    seed: int = 0,
    arith: bool = False,
) -> tuple[list[dict[str, int]], str, dict[str, int] | None]:
    """(candidates with the default first, where they came from, a configuration to lock to or None).

    Without ``arith`` every candidate has the seven kernels' arithmetic (``tile.arith`` 0), so switching
    configurations mid-run changes no bit of the answer: drawn ones and a table's are set to it (where still
    valid; a sweep's best rows are mostly arith 1, and the same tile with arith 0 is the nearest seed). With
    ``arith`` the other arithmetic may run too (within 1e-12, not bitwise).
    """
    default = dict(space.default)
    if mode == "scan":
        drawn = [dict(c) for c in space.sample(scan_count, seed)]
        if not arith and "tile.arith" in default:
            drawn = [c for c in ({**c, "tile.arith": 0} for c in drawn) if space.is_valid(c)]
        return _unique([default, *drawn]), f"scan: the default and {len(drawn)} drawn with seed {seed}", None
    if mode != "seeded":
        raise TunerError(f"--autotune must be scan or seeded for whole configurations (got {mode!r})")
    if table_path is None:
        raise TunerError(
            "--autotune seeded needs --tuning-table FILE (a fused sweep's or a tuned run's table)"
        )
    configs, source, entry_size = table_configurations(table_path, gpu_class, size)
    if not configs:
        raise TunerError(f"{table_path}: no whole configuration for GPU class {gpu_class!r} in this table")
    # a table written before a parameter joined the space (tile.arith, 2026-11-25) runs it at the default
    configs = [{**{k: v for k, v in default.items() if k not in c}, **c} for c in configs]
    other = 0 if arith else sum(bool(c.get("tile.arith", 0)) for c in configs)
    if other:
        configs = _unique([{**c, "tile.arith": 0} for c in configs])
    valid = [c for c in configs if space.is_valid(c)]
    if not valid:
        raise TunerError(
            f"{table_path}: no whole configuration of the fused space for GPU class {gpu_class!r} "
            f"({len(configs)} listed, none valid here)"
        )
    dropped = len(configs) - len(valid)
    note = f"{source} {gpu_class} {entry_size}" + (f" ({dropped} invalid here, dropped)" if dropped else "")
    if other:
        note += f" ({other} of another arithmetic, tile.arith=1, run with the seven kernels' instead)"
    if source == RUNTIME and entry_size == size:
        return _unique([valid[0], default, *valid[1:count]]), f"locked from {note}", valid[0]
    return _unique([default, *valid[:count]]), note, None


class WholeTuner:
    """Steps ``solver`` at the configuration its tuner asks for; ``step`` stands in for ``solver.step``."""

    def __init__(
        self,
        solver: Any,
        candidates: list[dict[str, int]],
        *,
        samples: int = 3,
        period_s: float | None = 300.0,
        period_steps: int | None = None,
        time_idle: int = 100,
        restored: Mapping[str, int] | None = None,
        context: Mapping[str, Any] | None = None,
    ):
        self.solver = solver
        self.steps = 0
        self.tuner = Autotuner(
            NAME,
            [config_key(c) for c in candidates],
            samples=samples,
            period_s=period_s,
            period_steps=period_steps,
            time_idle=time_idle,
            clock=solver.backend.stopwatch(),
            step=lambda: self.steps,
        )
        self.current: Hashable | None = None
        self.rejected: list[dict[str, Any]] = []
        self.context = dict(context or {})
        if restored is not None:
            self.tuner.lock(config_key(restored))

    def _apply(self) -> None:
        """Set the tuner's configuration on the solver; drop candidates the solver refuses."""
        while self.tuner.param != self.current:
            param = self.tuner.param
            try:
                self.solver.set_config(as_config(param))
                self.current = param
            except ValueError as exc:  # cannot run on this device: out of the candidates, never a crash
                self.rejected.append({"config": as_config(param), "why": str(exc)})
                self.tuner.begin()
                self.tuner.reject()

    def step(self, residuals: bool = False) -> Any:
        self._apply()
        self.steps += 1
        self.tuner.begin()
        out = self.solver.step(residuals=residuals)
        self.tuner.end()
        return out

    def summary(self) -> dict[str, Any]:
        """The chosen configuration, when it was chosen, and the scan's times of it and of the default."""
        s = self.tuner.stats()
        ranked = {k: ms for k, ms in self.tuner.ranking()}
        default = self.context.get("default")
        default_ms = ranked.get(config_key(default)) if default else None
        best = as_config(s["param"]) if s["param"] is not None else None
        return {
            "space": "fused",
            "config": best,
            "default": default,
            "seed": self.context.get("seed", ""),
            "mode": self.context.get("mode", ""),
            "compile_ms": self.context.get("compile_ms"),
            "state": s["state"],
            "candidates": s["candidates"],
            "rejected": self.rejected,
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
        if not self.tuner.scans or "gpu_class" not in self.context:
            return None
        ranked = self.tuner.ranking()
        best = self.tuner.param if self.tuner.state == IDLE else (ranked[0][0] if ranked else None)
        if best is None:
            return None
        rows: list[dict[str, Any]] = [
            {"config": as_config(k), "time_ms": round(ms, 6)} for k, ms in ranked[:keep]
        ]
        if not rows or config_key(rows[0]["config"]) != best:
            rows.insert(0, {"config": as_config(best)})
        return {
            "gpu_class": self.context["gpu_class"],
            "size": self.context["size"],
            "source": RUNTIME,
            "space": "fused",
            "device": self.context.get("device", ""),
            "best": rows[0]["config"],
            "candidates": rows,
        }

    def write_table(self, path: Path) -> Path | None:
        entry = self.table_entry()
        if entry is None:
            return None
        write_text(path, json.dumps({"format": FORMAT, "version": 1, "entries": [entry]}, indent=1) + "\n")
        return path


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
    arith: bool = False,
) -> WholeTuner:
    """A :class:`WholeTuner` over the fused space of ``solver`` (every variant compiled first); ``arith``:
    candidates may use the other arithmetic (``whole_candidates``)."""
    before = solver.compile_ms_total()
    space = solver.space("fused")  # compiles every fused variant on a GPU: no timed step compiles
    compile_ms = solver.compile_ms_total() - before
    device = describe_device(solver.backend)
    size = size_key(solver.size)
    cands, seed_text, restored = whole_candidates(
        space,
        mode,
        table_path,
        device["gpu_class"],
        size,
        count=count,
        scan_count=scan_count,
        seed=seed,
        arith=arith,
    )
    context = {
        "gpu_class": device["gpu_class"],
        "size": size,
        "device": device.get("device_name", ""),
        "default": dict(space.default),
        "seed": seed_text,
        "mode": mode,
        "compile_ms": round(compile_ms, 1),
    }
    return WholeTuner(solver, cands, samples=samples, period_s=period_s, restored=restored, context=context)


def _unique(configs: list[dict[str, int]]) -> list[dict[str, int]]:
    seen: set[Key] = set()
    out = []
    for c in configs:
        if config_key(c) not in seen:
            seen.add(config_key(c))
            out.append(c)
    return out
