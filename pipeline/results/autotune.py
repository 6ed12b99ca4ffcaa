"""Runtime-autotuner records: launch logs (``launches*.csv[.gz]``) and ``results.json`` of
``benchmarks/autotune_runtime.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import UserError
from ..jsonio import read_json

LAUNCH_COLUMNS = ("seq", "kernel", "step", "state", "blocks", "threads", "time_ms", "nonoptimal")


def launch_logs(results: str | Path) -> dict[str, Path]:
    """Every launch log under ``results``, labelled ``<folder>/<run>`` (``launches_scan.csv.gz``: scan)."""
    results = Path(results)
    out = {}
    for p in sorted(results.rglob("launches*.csv*")):
        if p.name.endswith((".csv", ".csv.gz")):
            run = p.name.split(".csv")[0].removeprefix("launches").lstrip("_-") or p.parent.name
            out[f"{p.parent.name}/{run}"] = p
    return out


def load_launches(path: str | Path) -> pd.DataFrame:
    """A ``LaunchLog`` CSV (``kernels/autotune/log.py``), plain or gzipped."""
    path = Path(path)
    try:
        df = pd.read_csv(path)
    except Exception as exc:  # a truncated gzip or a foreign file
        raise UserError(f"{path}: cannot read the launch log ({type(exc).__name__}: {exc})") from None
    missing = [c for c in LAUNCH_COLUMNS if c not in df]
    if missing:
        raise UserError(f"{path}: missing column {missing[0]!r} (expected {', '.join(LAUNCH_COLUMNS)})")
    return df.astype({"nonoptimal": bool})


def tuning_steps(launches: pd.DataFrame) -> pd.DataFrame:
    """Per kernel: the step its tuning ended (last launch not ``idle``), the parameters it locked (those of
    its last launch), logged launches while tuning and at non-optimal parameters, the median locked time."""
    rows = []
    for kernel, k in launches.sort_values("seq").groupby("kernel", sort=False):
        tuning = k[k["state"] != "idle"]
        idle = k[k["state"] == "idle"]
        last = k.iloc[-1]
        rows.append(
            {
                "kernel": kernel,
                "tuned_at_step": int(tuning["step"].max()) if len(tuning) else None,
                "blocks": int(last["blocks"]),
                "threads": int(last["threads"]),
                "tuning_launches": len(tuning),
                "nonoptimal_launches": int(k["nonoptimal"].sum()),
                "candidates": int(tuning[["blocks", "threads"]].drop_duplicates().shape[0]),
                "locked_median_ms": float(idle["time_ms"].median()) if len(idle) else np.nan,
            }
        )
    return pd.DataFrame(rows)


def autotune_results(folder: str | Path) -> dict[str, Any] | None:
    """``results.json`` of ``benchmarks/autotune_runtime.py`` in ``folder``, if there is one."""
    return read_json(Path(folder) / "results.json")


def run_summary(results: dict[str, Any]) -> pd.DataFrame:
    """One row per run of ``results.json``: steps, ms per step, and for tuned runs the longest first scan and
    the share of kernel time at non-optimal parameters."""
    rows = []
    for name, run in (results or {}).get("runs", {}).items():
        kernels = ((run.get("summary") or {}).get("kernels")) or {}
        nonopt = sum(k.get("nonoptimal_ms") or 0 for k in kernels.values())
        timed = sum(k.get("timed_ms") or 0 for k in kernels.values())
        scans = [k.get("first_scan_steps") for k in kernels.values() if k.get("first_scan_steps") is not None]
        rows.append(
            {
                "run": name,
                "steps": run.get("steps"),
                "ms_per_step_mean": run.get("ms_per_step_mean"),
                "ms_per_step_median_2nd_half": run.get("ms_per_step_last_half_median"),
                "scan_steps": max(scans) if scans else None,
                "nonoptimal_launches": sum(k.get("nonoptimal_launches") or 0 for k in kernels.values())
                if kernels
                else None,
                "nonoptimal_share_pct": 100 * nonopt / timed if timed else None,
            }
        )
    return pd.DataFrame(rows)


def per_step_times(results: dict[str, Any]) -> pd.DataFrame:
    """Long frame (run, step, ms) of the per-step times ``results.json`` keeps: a list per run with every
    step, or (older files) ``{"steps": [...], "ms": [...]}`` thinned after step 800."""
    parts = []
    for name, run in (results or {}).get("per_step_ms", {}).items():
        if isinstance(run, dict):
            steps, ms = run.get("steps") or [], run.get("ms") or []
        else:
            ms = list(run or [])
            steps = list(range(len(ms)))
        parts.append(pd.DataFrame({"run": name, "step": steps[: len(ms)], "ms": ms[: len(steps)]}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["run", "step", "ms"])


def autotune_picks(results: dict[str, Any]) -> pd.DataFrame:
    """Per kernel and tuned run: the (blocks, threads) picked and its time alone over the exhaustive best."""
    rows = []
    for kernel, k in (results or {}).get("per_kernel", {}).items():
        row = {
            "kernel": kernel,
            "exhaustive best": tuple(k.get("exhaustive_best") or ()),
            "default over best": k.get("default_over_best"),
        }
        for run in ("scan", "seeded"):
            if isinstance(k.get(run), dict):
                row[f"{run} pick"] = tuple(k[run].get("param") or ())
                row[f"{run} over best"] = k[run].get("over_best")
        rows.append(row)
    return pd.DataFrame(rows)
