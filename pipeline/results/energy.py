"""Time against energy of a sweep's rows, where they were measured for both (``kernels.energy``): the
Pareto front per GPU class (no other configuration is both faster and uses less energy) and the pick under
each objective, for the report's section and figure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

ENERGY = "energy_mJ"


def pareto_front(times: Sequence[float], energies: Sequence[float]) -> list[int]:
    """Indices of the points that no other point beats on both time and energy (lower is better), in order
    of time; ties on time keep the least energy."""
    t, e = np.asarray(times, dtype=float), np.asarray(energies, dtype=float)
    order = np.lexsort((e, t))
    front, best = [], np.inf
    for i in order:
        if np.isfinite(t[i]) and np.isfinite(e[i]) and e[i] < best:
            front.append(int(i))
            best = e[i]
    return front


def energy_rows(frame: pd.DataFrame, gpu_class: str) -> pd.DataFrame:
    """The class's ok rows that have both a time and an energy (empty where none was measured)."""
    if ENERGY not in frame.columns:
        return frame.iloc[0:0]
    rows = frame[(frame["gpu_class"] == gpu_class) & (frame["status"] == "ok")]
    return rows[rows["total_ms"].notna() & rows[ENERGY].notna()].reset_index(drop=True)


def energy_summary(rows: pd.DataFrame, params: Sequence[str]) -> dict[str, Any] | None:
    """The pick under ``minimize: time`` and under ``minimize: energy_mJ`` among ``rows`` (their time, energy
    and power) and the size of the front; None without rows."""
    if rows.empty:
        return None

    def entry(i: int) -> dict[str, Any]:
        r = rows.iloc[i]
        out = {
            "config": {p: int(r[p]) for p in params},
            "time_ms": float(r["total_ms"]),
            ENERGY: float(r[ENERGY]),
        }
        if "power_W" in rows.columns and pd.notna(r["power_W"]):
            out["power_W"] = float(r["power_W"])
        return out

    front = pareto_front(rows["total_ms"], rows[ENERGY])
    return {
        "rows": int(len(rows)),
        "front": [entry(i) for i in front],
        "time_pick": entry(int(np.argmin(rows["total_ms"].to_numpy(float)))),
        "energy_pick": entry(int(np.argmin(rows[ENERGY].to_numpy(float)))),
    }
