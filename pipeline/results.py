"""Read a results folder for the notebooks: sweep folders, surrogate metrics and predictions, the tridiagonal
streams measurements and the runtime autotuner's launch logs.

A results folder is anything holding these (the committed ``data/`` by default): every subfolder with
``sweep.json`` and ``merged/`` is a sweep, every ``streams.csv`` a tridiagonal measurement, every
``launches*.csv[.gz]`` a tuned run's launch log. Nothing here assumes which GPU classes are present, so a
folder with h100, h200 and cpu sweeps (and their combination) reads the same way as one with a single class.
Reading only: nothing is written, so the notebooks can run on a read-only checkout.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import r2_score

from pipeline.errors import UserError
from pipeline.jsonio import read_json
from pipeline.schema import kernel_column, kernel_params
from pipeline.shards import load_merged
from pipeline.spec import SweepSpec
from pipeline.train import design, features_for, ok_rows, read_sweep

RESULTS_ENV = "LAUNCHTUNE_NOTEBOOK_RESULTS"  # set by `python -m pipeline notebooks --results DIR`
REPO = Path(__file__).resolve().parents[1]
DEFAULT_RESULTS = REPO / "data"
LAUNCH_COLUMNS = ("seq", "kernel", "step", "state", "blocks", "threads", "time_ms", "nonoptimal")


def results_folder(path: str | Path | None = None) -> Path:
    """The results folder a notebook reads: ``path``, else ``$LAUNCHTUNE_NOTEBOOK_RESULTS``, else ``data/``.

    A relative path is tried against the working directory, then the repository root, so the same first cell
    works from ``notebooks/`` in Jupyter and from the repository root under ``make notebooks``.
    """
    value = path if path not in (None, "") else os.environ.get(RESULTS_ENV) or DEFAULT_RESULTS
    value = Path(value).expanduser()
    candidates = [value] if value.is_absolute() else [Path.cwd() / value, REPO / value]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate.resolve()
    raise UserError(f"{value}: no such results folder (tried {', '.join(str(c) for c in candidates)})")


# -- sweeps ------------------------------------------------------------------------------------------------
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
    found = {p.parent for p in results.rglob("sweep.json") if (p.parent / "merged").is_dir()}
    return sorted(p for p in found if not any(part.startswith(".") for part in p.relative_to(results).parts))


def load_sweep(path: str | Path) -> Sweep:
    path = Path(path)
    spec, plan = read_sweep(path)
    return Sweep(
        path=path,
        spec=spec,
        plan=plan,
        frame=load_merged(path),
        metrics=read_json(path / "models" / "metrics.json"),
        report=read_json(path / "report.json"),
        validation=read_json(path / "validation.json"),
        tuning_table=read_json(path / "tuning_table.json"),
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


# -- surrogates --------------------------------------------------------------------------------------------
def r2_table(metrics: dict[str, Any]) -> pd.DataFrame:
    """One row per (group, model) of a ``models/metrics.json``: R2 and MSE on train and test, sizes."""
    rows = []
    for group, entry in (metrics or {}).get("groups", {}).items():
        for name, m in entry.get("models", {}).items():
            rows.append(
                {
                    "group": group,
                    "model": name,
                    **{
                        k: m.get(k)
                        for k in ("r2_train", "r2_test", "mse_train", "mse_test", "n_train", "n_test")
                    },
                    "search_model": entry.get("search_model") == name,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "group",
            "model",
            "r2_train",
            "r2_test",
            "mse_train",
            "mse_test",
            "n_train",
            "n_test",
            "search_model",
        ],
    )


def loss_curves(metrics: dict[str, Any], model: str = "mlp") -> dict[str, np.ndarray]:
    """The recorded training loss per epoch of ``model`` in every group that has one."""
    out = {}
    for group, entry in (metrics or {}).get("groups", {}).items():
        curve = entry.get("models", {}).get(model, {}).get("loss_curve") or []
        if len(curve):
            out[group] = np.asarray(curve, dtype=float)
    return out


def surrogate_sweeps(sweeps: list[Sweep]) -> list[Sweep]:
    """The folders whose models to show: the combined folder(s) where there is one (their groups hold every
    class and the combination), else every folder with metrics."""
    trained = [s for s in sweeps if s.metrics and s.metrics.get("groups")]
    combined = [s for s in trained if s.combined]
    return combined or trained


def prediction_groups(sweep: Sweep) -> list[str]:
    """Groups whose predictions are worth drawing: each class, and ``combined`` only where it combines more
    than one class (in a one-class folder it is the same rows with constant device columns)."""
    groups = [g for g, e in (sweep.metrics or {}).get("groups", {}).items() if e.get("models")]
    return [g for g in groups if g in sweep.classes or (g == "combined" and sweep.combined)]


def group_model(sweep: Sweep, group: str, model: str = "mlp") -> Any:
    """The fitted model of a group: its skops file where the folder has one, else refitted as ``python -m
    pipeline train`` fits it (same rows, features, split, seed and model settings), in memory only.

    Refitting keeps the committed data small (model files are not committed) at the cost of a few seconds
    for the MLP; the refitted model's R2 is the one in ``metrics.json``.
    """
    from pipeline.models import load_model
    from pipeline.train import model_makers

    file = sweep.path / "models" / group / f"{model}.skops"
    if file.is_file():
        return load_model(file)
    _, X, y, tr, _ = _group_design(sweep, group)
    makers = model_makers(sweep.spec, len(tr), combined=group == "combined")
    if model not in makers:
        raise UserError(f"{file}: missing, and only {', '.join(makers)} can be refitted here")
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from threadpoolctl import threadpool_limits

    # One thread (BLAS, OpenMP): the MLP's matrices are small, and on a shared 2-core machine threads spinning
    # against other processes made this fit 14x slower (129 s against 9 s), with the same result.
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore", ConvergenceWarning)  # 200 epochs is the seed's budget, as in train
        return makers[model]().fit(X[tr], y[tr])


def _group_design(sweep: Sweep, group: str):
    """Rows, design matrix, target and the train/test positions of a group, as training made them."""
    from pipeline.train import group_split

    entry = (sweep.metrics or {}).get("groups", {}).get(group)
    if entry is None:
        raise UserError(f"{sweep.path}: models/metrics.json has no group {group!r}")
    if group != "combined" and group not in sweep.classes:
        raise UserError(f"{sweep.path}: group {group!r} is neither a GPU class of the data nor 'combined'")
    rows = sweep.ok(None if group == "combined" else group)
    features = entry.get("features") or features_for(sweep.plan, group == "combined")
    missing = [f for f in features if f not in rows]
    if missing:
        raise UserError(
            f"{sweep.path}: group {group!r} was trained on {missing[0]!r}, not in the merged data"
        )
    tr, te = group_split(rows, sweep.spec.test_fraction, sweep.spec.seed)
    return rows, design(rows, features), rows["total_ms"].to_numpy(float), tr, te


def predictions(sweep: Sweep, group: str, model: str = "mlp", fitted: Any = None) -> pd.DataFrame:
    """Measured and predicted total time of every ok row of a group, with its split (``train``/``test``) and
    class: the data of a predicted-vs-actual plot (Figs. 11 and 14 of the CFD seed)."""
    rows, X, y, tr, te = _group_design(sweep, group)
    fitted = fitted if fitted is not None else group_model(sweep, group, model)
    part = np.empty(len(rows), dtype=object)
    part[tr], part[te] = "train", "test"
    return pd.DataFrame(
        {
            "gpu_class": rows["gpu_class"].to_numpy(),
            "split": part,
            "measured_ms": y,
            "predicted_ms": fitted.predict(X),
        }
    )


def prediction_scores(pred: pd.DataFrame) -> dict[str, float]:
    """R2 per split of a ``predictions`` frame (what the plot's titles show)."""
    return {
        s: float(r2_score(p["measured_ms"], p["predicted_ms"]))
        for s, p in pred.groupby("split")
        if len(p) > 1
    }


def comparison_table(metrics: dict[str, Any]) -> pd.DataFrame:
    """Per class and model: the class's own model against the combined one on the same test rows (R2 and
    Spearman's rho; the ``comparison`` block ``python -m pipeline train`` writes for a folder of several
    classes); empty without one."""
    rows = []
    for cls, entry in ((metrics or {}).get("comparison") or {}).items():
        own, comb = entry.get("per_class") or {}, entry.get("combined") or {}
        for name in dict.fromkeys([*own, *comb]):
            a, b = own.get(name, {}), comb.get(name, {})
            rows.append(
                {
                    "gpu_class": cls,
                    "model": name,
                    "n_test": entry.get("n_test"),
                    "r2_per_class": a.get("r2"),
                    "r2_combined": b.get("r2"),
                    "spearman_per_class": a.get("spearman"),
                    "spearman_combined": b.get("spearman"),
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "gpu_class",
            "model",
            "n_test",
            "r2_per_class",
            "r2_combined",
            "spearman_per_class",
            "spearman_combined",
        ],
    )


def loco_table(metrics: dict[str, Any]) -> pd.DataFrame:
    """Leave-one-class-out (the ``loco`` block of a combined folder's metrics): per held-out class and model,
    R2, rank correlation and what the prediction would pick (its measured time over the class's best);
    empty without one."""
    rows = []
    for held, entry in ((metrics or {}).get("loco") or {}).items():
        for name, m in (entry.get("models") or {}).items():
            rows.append(
                {
                    "held_out": held,
                    "trained_on": ", ".join(entry.get("trained_on", [])),
                    "model": name,
                    "n_test": entry.get("n_test"),
                    "r2_test": m.get("r2_test"),
                    "spearman": m.get("spearman"),
                    "picked_over_best": m.get("picked_over_best"),
                    "median_over_best": m.get("median_over_best"),
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "held_out",
            "trained_on",
            "model",
            "n_test",
            "r2_test",
            "spearman",
            "picked_over_best",
            "median_over_best",
        ],
    )


# -- tridiagonal streams -----------------------------------------------------------------------------------
@dataclass
class Tridiag:
    """One GPU's tridiagonal measurements: (size, streams) times, baselines, meta and the stream models."""

    path: Path
    data: pd.DataFrame
    baselines: pd.DataFrame | None
    meta: dict[str, Any]
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # a model that could not be fitted, and why

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def label(self) -> str:
        return str((self.meta.get("device") or {}).get("gpu_class") or self.name)

    @property
    def can_denoise(self) -> bool:
        """The stage spans are there, so the host stage can be replaced by its median."""
        return {"stage1_span", "stage3_span"} <= set(self.data.columns)


def tridiag_folders(results: str | Path) -> list[Path]:
    """Every folder under ``results`` holding a ``streams.csv`` (``data/tridiag/<class>/``), sorted."""
    return sorted({p.parent for p in Path(results).rglob("streams.csv")})


def load_tridiag(path: str | Path) -> Tridiag:
    """Read a folder of ``benchmarks/tridiag_streams.py`` and fit the stream models to it with
    ``pipeline.streams_model`` (half a second): on the raw end-to-end times and, where the stage spans are
    there, on the host-denoised ones. Fitted rather than read from ``model_raw/``, which could be older than
    the data; with the same data, seed and tau the result is the stored one."""
    from pipeline.streams_model import SEED_TAU_MS, denoise_host, evaluate, load_dataset

    path = Path(path)
    data = load_dataset(path / "streams.csv")
    meta = read_json(path / "meta.json") or {}
    base = path / "baselines.csv"
    baselines = pd.read_csv(base) if base.is_file() else None
    tau = meta.get("tau_ms") if isinstance(meta.get("tau_ms"), int | float) else SEED_TAU_MS
    models, skipped = {}, {}
    for which in ("raw", "denoised"):
        try:
            df = data if which == "raw" else denoise_host(data, str(path))
            models[which] = evaluate(df, tau_ms=tau, source=str(path))
        except UserError as exc:  # too few sizes for the splits, or no spans to denoise
            skipped[which] = str(exc)
    return Tridiag(path=path, data=data, baselines=baselines, meta=meta, models=models, skipped=skipped)


def load_tridiags(results: str | Path) -> list[Tridiag]:
    folders = tridiag_folders(results)
    if not folders:
        raise UserError(f"{results}: no tridiagonal measurements (a folder holding streams.csv)")
    return [load_tridiag(p) for p in folders]


def stream_times(td: Tridiag, denoised: bool = False) -> pd.DataFrame:
    """Median end-to-end time per (size, streams); ``denoised`` rebuilds it without the host-stage jumps."""
    from pipeline.streams_model import denoise_host, tables

    df = denoise_host(td.data, str(td.path)) if denoised else td.data
    return tables(df, str(td.path))[1][["size", "streams", "total_ms"]]


def optimum_table(td: Tridiag, which: str = "raw") -> pd.DataFrame:
    """The seed's table: per size the measured best stream count against the seed model's and ours, and the
    time each prediction loses over the measured best (%)."""
    if which not in td.models:
        raise UserError(f"{td.path}: no {which} stream model ({td.skipped.get(which, 'not fitted')})")
    table = pd.DataFrame(td.models[which]["table"])
    return table[
        [
            "size",
            "best_streams",
            "best_ms",
            "one_stream_ms",
            "gomez_luna",
            "seed_streams",
            "seed_lost_pct",
            "ours_streams",
            "ours_lost_pct",
            "ours_split",
        ]
    ]


def stream_speedups(td: Tridiag, denoised: bool = False) -> pd.DataFrame:
    """Per size: the best stream count's time, and its speed-up over one stream and over cuSPARSE gtsv2 (with
    the same transfers; both its pivoting and non-pivoting variants where measured)."""
    times = stream_times(td, denoised)
    best = times.loc[times.groupby("size")["total_ms"].idxmin()].set_index("size")
    one = times[times["streams"] == 1].set_index("size")["total_ms"]
    out = pd.DataFrame(
        {"best_streams": best["streams"].astype(int), "best_ms": best["total_ms"], "one_stream_ms": one}
    )
    out["over_one_stream"] = out["one_stream_ms"] / out["best_ms"]
    if td.baselines is not None:
        b = td.baselines.set_index("size")
        for col, name in (("gtsv2_ms", "over_gtsv2"), ("gtsv2_nopivot_ms", "over_gtsv2_nopivot")):
            if col in b:
                out[col] = b[col].reindex(out.index)
                out[name] = out[col] / out["best_ms"]
    return out.reset_index()


# -- runtime autotuner -------------------------------------------------------------------------------------
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
