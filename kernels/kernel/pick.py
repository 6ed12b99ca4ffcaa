"""From Python, the tuned configuration for the GPU this process runs on, from a sweep's tuning table."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..tuning_table import best_for
from .spec import load_kernel_spec


@dataclass(frozen=True)
class DevicePick:
    """The configuration to launch on this device: ``tuned`` False where the table has no entry for its
    class (then the table's default configuration). With a kernel spec, the launch geometry too."""

    gpu_class: str
    config: dict[str, int]
    tuned: bool
    ms: float | None = None  # the objective's cost (lower is better; time in ms by default)
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    defines: dict[str, Any] = field(default_factory=dict)
    objective: dict[str, str] = field(default_factory=lambda: {"minimize": "time"})


def current_gpu_class() -> str:
    from ..backend import get_backend
    from ..device import describe_device

    return str(describe_device(get_backend("auto"))["gpu_class"])


def pick_for_device(
    table_path: str | Path,
    spec_path: str | Path | None = None,
    size: str | None = None,
    gpu_class: str | None = None,
) -> DevicePick:
    """The pick of ``table_path`` (a sweep's ``tuning_table.json``) for ``gpu_class`` (default: this
    process's device); with ``spec_path`` (the kernel spec) also its grid, block and ``#define`` values at
    ``size`` (default: the table entry's size)."""
    cls = gpu_class or current_gpu_class()
    best = best_for(table_path, cls)  # its entry's best, else the first entry's default
    config, objective = best.config, best.objective
    pick = DevicePick(cls, config, tuned=best.tuned, ms=best.ms, objective=objective)
    if spec_path is None:
        return pick
    spec = load_kernel_spec(spec_path)
    problem = spec.problem(size or best.entry.get("size"))
    return DevicePick(
        cls,
        config,
        pick.tuned,
        pick.ms,
        grid=spec.grid(config, problem),
        block=spec.block(config),
        defines=spec.defines(config, problem),
        objective=objective,
    )
