"""Sweep folders (``sweep.json`` + ``merged/``): loading, runtime overview, per-kernel grids, best
configurations. A folder with ``sweep.json`` and ``models/metrics.json`` but no ``merged/`` (a combined
folder whose sources' rows are not committed, such as one over Kernel Tuner caches) is read on request, for
its models' scores only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import UserError
from ..store.folder import Metrics, PlanFacts, SweepFolder, ok_rows
from ..store.schema import cost_column, kernel_column, kernel_params
from ..store.shards import load_merged
from ..store.spec import SweepSpec
from ..store.workloads import declared

NO_ROWS = ["sample_id", "gpu_class", "status", "total_ms"]  # the columns of a folder without merged/


@dataclass
class Sweep:
    """One sweep folder, read once: its spec, plan, merged rows and whatever the later steps wrote."""

    path: Path
    spec: SweepSpec
    plan: PlanFacts
    frame: pd.DataFrame
    metrics: Metrics | None = None
    report: dict[str, Any] | None = None
    validation: dict[str, Any] | None = None
    tuning_table: dict[str, Any] | None = None
    label: str | None = None  # set by load_sweeps: the folder's path under the results folder

    @property
    def name(self) -> str:
        """How tables and titles name the folder: its path under the results folder it was found in
        (``cfd/h100/sweep_paper``; two folders named ``combined`` stay apart), else the folder's own name."""
        return self.label or self.path.name

    @property
    def has_rows(self) -> bool:
        """Whether the folder's measured rows are here (``merged/``); without them only its models' scores."""
        return not self.frame.empty

    @property
    def classes(self) -> list[str]:
        if self.has_rows:
            return sorted(self.frame["gpu_class"].unique())
        groups = (self.metrics or {}).get("groups", {})
        return sorted(self.spec.gpu_classes or [g for g in groups if g != "combined"])

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


def sweep_folders(results: str | Path, without_rows: bool = False) -> list[Path]:
    """Every folder under ``results`` (itself included) holding ``sweep.json`` and ``merged/``, sorted; with
    ``without_rows`` also those holding ``sweep.json`` and ``models/metrics.json`` only."""
    results = Path(results)

    def readable(folder: SweepFolder) -> bool:
        return folder.is_sweep() or (without_rows and (folder.models_dir / "metrics.json").is_file())

    found = {p.parent for p in results.rglob("sweep.json") if readable(SweepFolder(p.parent))}
    return sorted(p for p in found if not any(part.startswith(".") for part in p.relative_to(results).parts))


def load_sweep(path: str | Path) -> Sweep:
    folder = SweepFolder(Path(path))
    spec, plan = folder.read_spec()
    return Sweep(
        path=folder.path,
        spec=spec,
        plan=plan,
        # no merged/: an empty frame, so a notebook can still show the folder's model scores
        frame=load_merged(folder.path) if folder.merged_dir.is_dir() else pd.DataFrame(columns=NO_ROWS),
        metrics=folder.read_metrics(),
        report=folder.read_report(),
        validation=folder.read_validation(),
        tuning_table=folder.read_tuning_table(),
    )


def load_sweeps(results: str | Path, without_rows: bool = False) -> list[Sweep]:
    """Every sweep of a results folder (with ``without_rows``, also the folders holding only the models'
    scores, as ``sweep_folders``); an error when there is none, since every notebook needs one."""
    folders = sweep_folders(results, without_rows)
    if not folders:
        what = "sweep.json and merged/ or models/metrics.json" if without_rows else "sweep.json and merged/"
        raise UserError(f"{results}: no sweep folder (a folder holding {what})")
    sweeps = [load_sweep(p) for p in folders]
    root = Path(results).resolve()
    for s in sweeps:
        under = s.path.resolve().relative_to(root).as_posix()
        s.label = None if under == "." else under
    return sweeps


def time_label(workload: str) -> str:
    """Axis label of a sweep's ``total_ms``: a CFD sample is one time step, a ``kernel`` sample one launch of
    the user's kernel, other workloads one solve."""
    labels = {"cfd": "time per step (ms)", "kernel": "kernel time per launch (ms)"}
    return labels.get(workload, "total time (ms)")


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
    if declared(sweep.spec.workload).kernel_spec:
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
    for s in sorted((s for s in sweeps if s.has_rows), key=lambda s: (s.combined, s.name)):
        for cls in s.classes:
            if cls not in out:
                out[cls] = (s, s.ok(cls))
    return out


def reference_times(sweep: Sweep, gpu_class: str) -> dict[str, float]:
    """Times to mark on a class's distribution: best sampled, re-measured default and predicted best."""
    out: dict[str, float] = {}
    ok = sweep.ok(gpu_class)
    if len(ok):
        out["best sampled"] = float(ok[cost_column(list(ok.columns))].min())
    summary = ((sweep.report or {}).get("classes") or {}).get(gpu_class) or {}
    for key, label in (
        ("default_measured_ms", "default (re-measured)"),
        ("predicted_best_measured_ms", "predicted best (re-measured)"),
    ):
        if summary.get(key) is not None:
            out[label] = float(summary[key])
    return out


THREAD_BLOCK = ("block_size_x", "block_size_y")  # a kernel spec's thread block, in Kernel Tuner's names


def kernel_grid(
    rows: pd.DataFrame, plan: Mapping[str, Any], kernel: str, axes: tuple[str, str] | None = None
) -> pd.DataFrame:
    """Median time of one kernel per launch shape (Fig. 2 of the CFD seed): by default per (threads, blocks)
    of its own launch (rows index threads per block, columns blocks); with ``axes`` (column parameter, row
    parameter) over those two, named as the parameters (a ``kernel`` spec's thread block, the median over
    every other parameter).

    Every sample times every kernel, so each kernel's grid fills from all rows; only the plan's value lists
    are kept (the default launch, one thread per cell, lies outside them and is marked separately). A cell
    with no sample is NaN.
    """
    col = kernel_column(kernel)
    if axes is None:
        names = kernel_params(plan["params"]).get(kernel, [])
        blocks = next((n for n in names if n.endswith(".blocks")), None)
        threads = next((n for n in names if n.endswith(".threads")), None)
        if blocks is None or threads is None or col not in rows:
            raise UserError(f"kernel {kernel!r}: the sweep has no {kernel}.blocks/.threads or {col} column")
        x, y, labels = blocks, threads, ("blocks", "threads")
    else:
        x, y = axes
        if not {x, y} <= set(plan["params"]) or col not in rows:
            raise UserError(f"kernel {kernel!r}: the sweep has no {x}/{y} parameters or {col} column")
        labels = axes
    values = plan.get("values", {})
    grid = rows.dropna(subset=[col]).pivot_table(index=y, columns=x, values=col, aggfunc="median")
    if values.get(x) and values.get(y):
        grid = grid.reindex(index=values[y], columns=values[x])
    grid.columns.name, grid.index.name = labels
    return grid


def grid_axes(sweep: Sweep) -> tuple[str, str] | None:
    """The two parameters a ``kernel`` sweep's heat maps span: its thread block, where both of
    ``block_size_x`` and ``block_size_y`` are tuned over more than one value; None for any other sweep (a
    CFD kernel's grid is its own blocks and threads) or a spec with another thread block."""
    values = sweep.plan.get("values", {})
    if declared(sweep.spec.workload).kernel_spec and all(len(values.get(p) or []) > 1 for p in THREAD_BLOCK):
        return THREAD_BLOCK
    return None


def kernel_grids(sweep: Sweep, gpu_class: str) -> dict[str, pd.DataFrame]:
    """``kernel_grid`` for every kernel with launch-shape parameters, in the plan's kernel order: a CFD
    kernel's (blocks, threads), a ``kernel`` spec's thread block (``grid_axes``); empty where there are none
    (the tridiagonal solver)."""
    rows = sweep.ok(gpu_class)
    if "fusion" in rows:  # the seven kernels' launches only: a fused row times other kernels
        rows = rows[rows["fusion"] == 0]
    axes = grid_axes(sweep)
    if axes is not None:
        return {k: kernel_grid(rows, sweep.plan, k, axes) for k in sweep.kernels if kernel_column(k) in rows}
    groups = kernel_params(sweep.plan["params"])
    return {
        k: kernel_grid(rows, sweep.plan, k)
        for k in sweep.kernels
        if {f"{k}.blocks", f"{k}.threads"} <= set(groups.get(k, []))
    }


def grid_best(grid: pd.DataFrame) -> tuple[int, int, float]:
    """(column value, row value, ms) of a grid's fastest cell: (blocks, threads, ms) of a CFD kernel's."""
    stacked = grid.stack().dropna()
    if stacked.empty:
        raise UserError("empty grid: no sample timed this kernel")
    threads, blocks = stacked.idxmin()
    return int(blocks), int(threads), float(stacked.min())


def kernel_bests(grids: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per kernel: the fastest cell of its grid (columns named as the grid's axes: ``blocks`` and
    ``threads`` for a CFD kernel), its median time, and the slowest cell's."""
    rows = []
    for kernel, grid in grids.items():
        b, t, ms = grid_best(grid)
        worst = float(np.nanmax(grid.to_numpy(dtype=float)))
        rows.append(
            {
                "kernel": kernel,
                grid.columns.name or "blocks": b,
                grid.index.name or "threads": t,
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
        cost = ok[cost_column(list(ok.columns))]  # the objective's (time by default)
        rows.append(
            {
                "gpu_class": cls,
                "folder": s.name,
                "ok samples": len(ok),
                "median sampled ms": float(cost.median()) if len(ok) else np.nan,
                "best sampled ms": float(cost.min()) if len(ok) else np.nan,
                "default ms (re-measured)": default,
                "predicted best ms (re-measured)": best,
                "search model": summary.get("search_model"),
                "speed-up over default": default / best if default and best else np.nan,
                "best sampled over median": (float(cost.median() / cost.min()) if len(ok) else np.nan),
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
            best = ok.loc[ok[cost_column(list(ok.columns))].idxmin()]
            cols["best sampled"] = {p: int(best[p]) for p in sweep.plan["params"]}
    frame = pd.DataFrame({k: pd.Series(v, dtype="Int64") for k, v in cols.items() if v})
    return frame.reindex(sweep.plan["params"])
