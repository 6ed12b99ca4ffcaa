"""Sweep folders (``sweep.json`` + ``merged/``): loading, runtime overview, per-kernel grids, best
configurations.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.errors import UserError
from pipeline.sweep.folder import SweepFolder, ok_rows
from pipeline.sweep.schema import kernel_column, kernel_params
from pipeline.sweep.shards import load_merged
from pipeline.sweep.spec import SweepSpec


@dataclass
class Sweep:
    """One sweep folder, read once: its spec, plan, merged rows and whatever the later steps wrote."""

    path: Path
    spec: SweepSpec
    plan: dict[str, Any]
    frame: pd.DataFrame
    metrics: dict[str, Any] | None = None
    report: dict[str, Any] | None = None
    validation: dict[str, Any] | None = None
    tuning_table: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def classes(self) -> list[str]:
        return sorted(self.frame["gpu_class"].unique())

    @property
    def combined(self) -> bool:
        """More than one GPU class in one folder: the combined-training folder."""
        return len(self.classes) > 1

    @property
    def kernels(self) -> list[str]:
        return list(self.plan.get("kernels") or kernel_params(self.plan["params"]))

    def ok(self, gpu_class: str | None = None) -> pd.DataFrame:
        """Rows measured without error, in the order training used (class, sample id)."""
        return ok_rows(self.frame, gpu_class)


def sweep_folders(results: str | Path) -> list[Path]:
    """Every folder under ``results`` (itself included) holding ``sweep.json`` and ``merged/``, sorted."""
    results = Path(results)
    found = {p.parent for p in results.rglob("sweep.json") if SweepFolder(p.parent).is_sweep()}
    return sorted(p for p in found if not any(part.startswith(".") for part in p.relative_to(results).parts))


def load_sweep(path: str | Path) -> Sweep:
    folder = SweepFolder(path)
    spec, plan = folder.read_spec()
    return Sweep(
        path=folder.path,
        spec=spec,
        plan=plan,
        frame=load_merged(folder.path),
        metrics=folder.read_metrics(),
        report=folder.read_report(),
        validation=folder.read_validation(),
        tuning_table=folder.read_tuning_table(),
    )


def load_sweeps(results: str | Path) -> list[Sweep]:
    """Every sweep of a results folder; an error when there is none, since every notebook needs one."""
    folders = sweep_folders(results)
    if not folders:
        raise UserError(f"{results}: no sweep folder (a folder holding sweep.json and merged/)")
    return [load_sweep(p) for p in folders]


def time_label(workload: str) -> str:
    """Axis label of a sweep's ``total_ms``: a CFD sample is one time step, other workloads one solve."""
    return "time per step (ms)" if workload == "cfd" else "total time (ms)"


def sweep_overview(sweeps: list[Sweep]) -> pd.DataFrame:
    """One row per (folder, class): what was measured and how it went."""
    rows = []
    for s in sweeps:
        for cls in s.classes:
            part = s.frame[s.frame["gpu_class"] == cls]
            counts = part["status"].value_counts()
            rows.append(
                {
                    "folder": s.name,
                    "gpu_class": cls,
                    "device": str(part["device_name"].iloc[0]),
                    "workload": s.spec.workload,
                    "case": s.spec.case,
                    "size": s.spec.size,
                    "backend": s.spec.backend,
                    "samples": len(part),
                    **{st: int(counts.get(st, 0)) for st in ("ok", "invalid", "failed")},
                }
            )
    return pd.DataFrame(rows)


def launch_space(sweep: Sweep) -> str:
    """The launch space a sweep measured: its workload's ``space`` option (``paper``, ``wide``, ``fused``);
    a ``kernel`` sweep's space is its kernel spec's, named ``kernel/<case>``; ``default`` for a workload with
    one launch space (``tridiag``)."""
    options = sweep.spec.options or {}
    if "space" in options:
        return str(options["space"])
    if sweep.spec.workload == "kernel":
        return f"kernel/{sweep.spec.case}"
    return "default"


def of_space(sweeps: list[Sweep], space: str | None = None) -> list[Sweep]:
    """The sweeps of one launch space, so each class is drawn once per space: ``space`` or, where None, the
    space measured on the most GPU classes (the widest comparison; ties: more sweep folders, then the first by
    name). Counting folders alone flipped the committed data's default to the fused space once a second
    fused sweep per card landed, though the paper space covers three classes and the fused two."""
    if not sweeps:
        return []
    spaces = [launch_space(s) for s in sweeps]
    if space is None:
        classes = {
            sp: {c for s, x in zip(sweeps, spaces, strict=True) if x == sp for c in s.classes}
            for sp in spaces
        }
        space = max(sorted(set(spaces)), key=lambda sp: (len(classes[sp]), spaces.count(sp)))
    chosen = [s for s, sp in zip(sweeps, spaces, strict=True) if sp == space]
    if not chosen:
        raise UserError(f"no sweep of launch space {space!r} (spaces here: {', '.join(sorted(set(spaces)))})")
    return chosen


def class_rows(sweeps: list[Sweep]) -> dict[str, tuple[Sweep, pd.DataFrame]]:
    """Each GPU class once, with its ok rows: from its own folder where there is one, else from a combined
    folder (which holds copies of the same rows), so no class is drawn twice."""
    out: dict[str, tuple[Sweep, pd.DataFrame]] = {}
    for s in sorted(sweeps, key=lambda s: (s.combined, s.name)):
        for cls in s.classes:
            if cls not in out:
                out[cls] = (s, s.ok(cls))
    return out


def reference_times(sweep: Sweep, gpu_class: str) -> dict[str, float]:
    """Times to mark on a class's distribution: best sampled, re-measured default and predicted best."""
    out: dict[str, float] = {}
    ok = sweep.ok(gpu_class)
    if len(ok):
        out["best sampled"] = float(ok["total_ms"].min())
    summary = ((sweep.report or {}).get("classes") or {}).get(gpu_class) or {}
    for key, label in (
        ("default_measured_ms", "default (re-measured)"),
        ("predicted_best_measured_ms", "predicted best (re-measured)"),
    ):
        if summary.get(key) is not None:
            out[label] = float(summary[key])
    return out


def kernel_grid(rows: pd.DataFrame, plan: dict[str, Any], kernel: str) -> pd.DataFrame:
    """Median time of one kernel per (threads, blocks) of its own launch (Fig. 2 of the CFD seed).

    Every sample times every kernel, so each kernel's grid fills from all rows; only the plan's value lists
    are kept (the default launch, one thread per cell, lies outside them and is marked separately). Rows
    index threads per block, columns blocks; a cell with no sample is NaN.
    """
    names = kernel_params(plan["params"]).get(kernel, [])
    blocks = next((n for n in names if n.endswith(".blocks")), None)
    threads = next((n for n in names if n.endswith(".threads")), None)
    col = kernel_column(kernel)
    if blocks is None or threads is None or col not in rows:
        raise UserError(f"kernel {kernel!r}: the sweep has no {kernel}.blocks/.threads or {col} column")
    values = plan.get("values", {})
    grid = rows.dropna(subset=[col]).pivot_table(index=threads, columns=blocks, values=col, aggfunc="median")
    if values.get(blocks) and values.get(threads):
        grid = grid.reindex(index=values[threads], columns=values[blocks])
    grid.index.name, grid.columns.name = "threads", "blocks"
    return grid


def kernel_grids(sweep: Sweep, gpu_class: str) -> dict[str, pd.DataFrame]:
    """``kernel_grid`` for every kernel with (blocks, threads) parameters, in the plan's kernel order."""
    rows = sweep.ok(gpu_class)
    if "fusion" in rows:  # the seven kernels' launches only: a fused row times other kernels
        rows = rows[rows["fusion"] == 0]
    groups = kernel_params(sweep.plan["params"])
    return {
        k: kernel_grid(rows, sweep.plan, k)
        for k in sweep.kernels
        if {f"{k}.blocks", f"{k}.threads"} <= set(groups.get(k, []))
    }


def grid_best(grid: pd.DataFrame) -> tuple[int, int, float]:
    """(blocks, threads, ms) of a grid's fastest cell."""
    stacked = grid.stack().dropna()
    if stacked.empty:
        raise UserError("empty grid: no sample timed this kernel")
    threads, blocks = stacked.idxmin()
    return int(blocks), int(threads), float(stacked.min())


def kernel_bests(grids: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per kernel: the fastest (blocks, threads) of its grid, its median time, and the slowest cell's."""
    rows = []
    for kernel, grid in grids.items():
        b, t, ms = grid_best(grid)
        worst = float(np.nanmax(grid.to_numpy(dtype=float)))
        rows.append(
            {
                "kernel": kernel,
                "blocks": b,
                "threads": t,
                "median_ms": ms,
                "worst_ms": worst,
                "worst_over_best": worst / ms,
            }
        )
    return pd.DataFrame(rows)


def best_transfer(grids: dict[str, dict[str, pd.DataFrame]]) -> pd.DataFrame:
    """Do the classes' best launches differ? Per kernel and ordered pair of classes (``source``, ``target``):
    each one's fastest grid cell, and the target's median time at the source's best over the target's best
    (1.0 when the best cell is the same, or as fast). ``grids``: class -> ``kernel_grids(...)``."""
    rows = []
    classes = list(grids)
    for source in classes:
        for target in classes:
            if source == target:
                continue
            for kernel, grid in grids[source].items():
                if kernel not in grids[target]:
                    continue
                sb, st, _ = grid_best(grid)
                tb, tt, t_ms = grid_best(grids[target][kernel])
                at_source = grids[target][kernel].at[st, sb] if st in grids[target][kernel].index else np.nan
                rows.append(
                    {
                        "kernel": kernel,
                        "source": source,
                        "target": target,
                        "source_best": f"({sb}, {st})",
                        "target_best": f"({tb}, {tt})",
                        "same": (sb, st) == (tb, tt),
                        "target_ms_at_source_best_over_best": float(at_source) / t_ms,
                    }
                )
    return pd.DataFrame(rows)


def best_configurations(sweeps: list[Sweep]) -> pd.DataFrame:
    """Per class (once, as in ``class_rows``): best sampled, default and predicted best, re-measured."""
    rows = []
    for cls, (s, ok) in class_rows(sweeps).items():
        summary = ((s.report or {}).get("classes") or {}).get(cls) or {}
        default, best = summary.get("default_measured_ms"), summary.get("predicted_best_measured_ms")
        rows.append(
            {
                "gpu_class": cls,
                "folder": s.name,
                "ok samples": len(ok),
                "median sampled ms": float(ok["total_ms"].median()) if len(ok) else np.nan,
                "best sampled ms": float(ok["total_ms"].min()) if len(ok) else np.nan,
                "default ms (re-measured)": default,
                "predicted best ms (re-measured)": best,
                "search model": summary.get("search_model"),
                "speed-up over default": default / best if default and best else np.nan,
                "best sampled over median": (
                    float(ok["total_ms"].median() / ok["total_ms"].min()) if len(ok) else np.nan
                ),
            }
        )
    return pd.DataFrame(rows)


def best_config_table(sweep: Sweep, gpu_class: str) -> pd.DataFrame:
    """The launch parameters of the default, the best sampled and the predicted best configuration side by
    side, one row per parameter."""
    summary = ((sweep.report or {}).get("classes") or {}).get(gpu_class) or {}
    cols = {
        "default": summary.get("default_config") or sweep.plan.get("default"),
        "best sampled": summary.get("best_sampled_config"),
        "predicted best": summary.get("predicted_best_config"),
    }
    if not cols["best sampled"]:
        ok = sweep.ok(gpu_class)
        if len(ok):
            best = ok.loc[ok["total_ms"].idxmin()]
            cols["best sampled"] = {p: int(best[p]) for p in sweep.plan["params"]}
    frame = pd.DataFrame({k: pd.Series(v, dtype="Int64") for k, v in cols.items() if v})
    return frame.reindex(sweep.plan["params"])
