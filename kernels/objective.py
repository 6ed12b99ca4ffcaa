"""What a configuration is worth: the user's objective, and the one number every ranking reads.

An objective is a measured or derived quantity (``time`` in ms by default; a kernel spec's metric such as
``ms_per_step``; ``energy_mJ``; a Kernel Tuner cache's ``GFLOP/s``) and a direction. Everything that ranks
configurations (strategies live and replayed, surrogates, a sweep's pick and its re-measure against the
default, tuning tables, reports, exports) reads one number, the **cost**: lower is better whatever the
direction. A minimised quantity is its own cost; a maximised one costs its reciprocal (a maximised GFLOP/s
costs seconds per GFLOP), so costs stay positive and every ratio of the pipeline (pick over best, pick over
default) reads "times worse" in both directions. A maximised quantity that is not positive has no cost
(NaN): the row counts as failed.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from typing import Any

TIME = "time"

# Directions of the quantities a Kernel Tuner cache may name as its objective (Kernel Tuner's own observers
# and the metrics its examples define): what is named here needs no ``--objective NAME:max|min``.
KNOWN_DIRECTIONS: dict[str, bool] = {  # name (lower case) -> maximise?
    "time": False,
    "times": False,
    "energy": False,
    "gpu_energy": False,
    "nvml_energy": False,
    "energy_mj": False,
    "power": False,
    "gpu_power": False,
    "nvml_power": False,
    "power_w": False,
    "gflop/s": True,
    "gflops": True,
    "tflop/s": True,
    "tflops": True,
    "gb/s": True,
    "gbs": True,
    "gb/s/w": True,
    "gflops/w": True,
    "gflop/s/w": True,
    "gflops/watt": True,
    "gflop/w": True,
    "bandwidth": True,
    "throughput": True,
}


# The unit each quantity is shown in (name, lower case -> unit); a name not here is shown after its value as
# it is (``0.91 score``). Time is the workloads' milliseconds.
UNITS: dict[str, str] = {
    "time": "ms",
    "times": "ms",
    "ms_per_step": "ms per step",
    "energy": "mJ",
    "gpu_energy": "mJ",
    "nvml_energy": "mJ",
    "energy_mj": "mJ",
    "power": "W",
    "gpu_power": "W",
    "nvml_power": "W",
    "power_w": "W",
    "gflop/s": "GFLOP/s",
    "gflops": "GFLOP/s",
    "tflop/s": "TFLOP/s",
    "tflops": "TFLOP/s",
    "gb/s": "GB/s",
    "gbs": "GB/s",
    "gb/s/w": "GB/s/W",
    "gflops/w": "GFLOP/s/W",
    "gflop/s/w": "GFLOP/s/W",
    "gflops/watt": "GFLOP/s/W",
}

# The largest cost that is a measurement (a millisecond count of 31,000 years): past it, arithmetic on costs
# (a mean, a scaler's variance) overflows a float, and every model fitted to it is NaN.
MAX_COST = 1e15


class ObjectiveError(ValueError):
    """An objective without a direction, or given in a form that is not ``NAME:max|min``."""


@dataclass(frozen=True)
class Objective:
    """A quantity's name and whether it is maximised; :meth:`cost` maps its value to the lower-is-better
    number everything ranks by, :meth:`value` maps a cost back for display."""

    name: str = TIME
    maximize: bool = False

    @property
    def direction(self) -> str:
        return "maximize" if self.maximize else "minimize"

    @property
    def is_time(self) -> bool:
        return self.name == TIME and not self.maximize

    def cost(self, value: Any) -> float:
        """The lower-is-better number of ``value``; NaN where there is none (not a finite number, or not
        positive: a minimised cost of 0 or below would rank first without being measured)."""
        if value is None or isinstance(value, bool):
            return math.nan
        try:
            v = float(value)
        except (TypeError, ValueError):
            return math.nan
        if not math.isfinite(v):
            return math.nan
        if v <= 0:  # a time, an energy or a rate is positive; 0 or below is not a measurement
            return math.nan
        cost = 1.0 / v if self.maximize else v
        return cost if cost <= MAX_COST else math.nan

    def value(self, cost: float | None) -> float | None:
        """The quantity's own value of a ``cost`` (the inverse of :meth:`cost`)."""
        if cost is None or not math.isfinite(cost):
            return None
        return (1.0 / cost if cost else math.inf) if self.maximize else float(cost)

    @property
    def unit(self) -> str:
        """What the quantity's values are in: ``GFLOP/s`` for ``gflops``, ``ms`` for time, else its name."""
        return UNITS.get(self.name.lower(), self.name)

    def show(self, cost: float | None, digits: int = 4) -> str:
        """A cost as the user's quantity reads it, value and unit (``5508 GFLOP/s``, ``1.234 ms``): what every
        log line, summary, report and table prints; ``n/a`` where there is none."""
        value = self.value(cost)
        return "n/a" if value is None else f"{value:.{digits}g} {self.unit}"

    def as_dict(self) -> dict[str, str]:
        return {self.direction: self.name}

    def describe(self) -> str:
        return f"{self.direction} {self.name}"


DEFAULT = Objective()


def from_dict(raw: Any) -> Objective:
    """``{"minimize": NAME}`` or ``{"maximize": NAME}`` (None: minimise time); ``ObjectiveError`` else."""
    if raw is None:
        return DEFAULT
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ObjectiveError(f"expected {{minimize: NAME}} or {{maximize: NAME}}, got {raw!r}")
    ((direction, name),) = raw.items()
    if direction not in ("minimize", "maximize") or not isinstance(name, str) or not name.strip():
        raise ObjectiveError(f"expected {{minimize: NAME}} or {{maximize: NAME}}, got {raw!r}")
    return Objective(normal_name(name), direction == "maximize")


def normal_name(name: str) -> str:
    """A metric or objective name as Python reads an identifier (NFKC: fullwidth ``ｔｉｍｅ`` is ``time``),
    without the spaces around it: one quantity has one name however it was typed."""
    return unicodedata.normalize("NFKC", name).strip()


def parse_flag(text: str) -> Objective:
    """``--objective NAME:max|min`` (``NAME`` alone: its known direction)."""
    name, sep, direction = text.rpartition(":")
    if not sep:
        return known(text)
    if direction not in ("max", "min", "maximize", "minimize") or not normal_name(name):
        raise ObjectiveError(f"expected NAME:max or NAME:min, got {text!r}")
    return Objective(normal_name(name), direction.startswith("max"))


def known(name: str) -> Objective:
    """The objective ``name`` with its known direction; ``ObjectiveError`` where none is known."""
    maximize = KNOWN_DIRECTIONS.get(name.strip().lower())
    if maximize is None:
        raise ObjectiveError(
            f"objective {name!r} has no known direction (lower is better for time and energy, higher for "
            f"GFLOP/s and GB/s): pass --objective '{name}:max' or '{name}:min'"
        )
    return Objective(name, maximize)


def cost_of(timing: Any) -> float:
    """The cost a workload's ``Timing`` reports (``extra["objective"]``), else its total time."""
    extra = getattr(timing, "extra", None) or {}
    value = extra.get("objective")
    return float(timing.total) if value is None else float(value)
