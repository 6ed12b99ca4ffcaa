"""The report of a sweep folder: report.json (machine-readable), report.md, figures/*.png, tuning_table.json.

Reads only Parquet, JSON and skops files (models through the trust list). Re-measured results come from
``validation.json``, written by the sweep while its cluster was up; without it the report says so.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from launchtune.kernels import tuning_table
from launchtune.kernels.compare import Comparison
from launchtune.kernels.objective import from_dict

from ..errors import UserError
from ..store.folder import Metrics, PlanFacts, SweepFolder, data_hash, ok_rows, rows_by_class
from ..store.schema import cost_column, kernel_column, kernel_params
from ..store.shards import load_merged
from . import Sweep, search_traces, time_label
from .energy import energy_rows, energy_summary, pareto_front
from .markdown import render

logger = logging.getLogger(__name__)

TOP_CANDIDATES = 5
NUMPY_NOTE = "the numpy backend ignores launch parameters: no speed-up to report"
DEFAULT_NOTE = "the model picked the default itself: no speed-up to report"
COMPARISON_FIELDS = ("ratio", "low", "high", "verdict", "rounds", "confidence")
NOT_REMEASURED = "not re-measured (--remeasure, spec key remeasure: the pick timed against the default)"


def speedup_text(
    comparison: dict[str, Any] | None,
    backend: str | None,
    pick_is_default: bool = False,
    objective: dict[str, str] | None = None,
) -> str:
    """The predicted best against the default, as the report and the console say it: the ratio of times with
    its 95% interval and verdict (``kernels.compare``), the numpy note, or why there is none. A pick that is
    the default configuration has nothing to compare: two timings of it differ only by noise."""
    if backend == "numpy":
        return NUMPY_NOTE
    if pick_is_default:
        return DEFAULT_NOTE
    if not comparison:
        return "no interleaved re-measurement"
    goal = from_dict(objective)
    what = (
        "time of the pick / default"
        if goal.is_time
        else f"the default's {goal.unit} / the pick's"
        if goal.maximize
        else f"the pick's {goal.unit} / the default's"
    )
    return Comparison(**{k: comparison[k] for k in COMPARISON_FIELDS}).text() + f" ({what})"


def remeasure_line(
    top: dict[str, Any],
    default: dict[str, Any],
    comparison: dict[str, Any] | None,
    backend: str,
    objective: dict[str, str] | None = None,
) -> str:
    """One console line for a class's re-measurement, each value in the objective's unit (``objective``:
    the workload's, time where None), with its time beside it where the objective is not time."""

    def ms(m: dict[str, Any]) -> str:
        return shown(m, objective) if _cost(m) is not None else m["status"]

    same = top.get("config") == default.get("config")
    what = "best (a row the sweep recorded)" if top.get("recorded") else "predicted best"
    return f"{what} {ms(top)}, default {ms(default)}; {speedup_text(comparison, backend, same, objective)}"


def shown(m: dict[str, Any], objective: dict[str, str] | None) -> str:
    """A measured configuration's value as the user's objective reads it (``12.5 GFLOP/s``), its time beside
    it where the objective is not time (``12.5 GFLOP/s, 0.8 ms``)."""
    goal = from_dict(objective)
    text = goal.show(_cost(m))
    if not goal.is_time and m.get("total_ms") is not None:
        text += f", {m['total_ms']:.4g} ms"
    return text


def _cost(m: dict[str, Any]) -> float | None:
    """A re-measured configuration's cost: its objective's (``kernels.objective``; lower is better), its
    time where the workload states none (and in records written before objectives)."""
    value = m.get("objective", m.get("total_ms"))
    return None if value is None else float(value)


def _config(row: pd.Series, params: list[str]) -> dict[str, int]:
    return {p: int(row[p]) for p in params}


def _clean(obj: Any) -> Any:
    """JSON has no NaN: missing numbers become null, numpy scalars plain Python."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def first_runnable(validation: dict[str, Any] | None) -> dict[str, Any] | None:
    """The predicted best: the first re-measured candidate that ran. Since 2026-11-24 ``candidates`` are
    ordered fastest first (the fastest of the model's top k that ran); older folders kept the model's order
    and, before ``launchtune.pipeline.learn.pick``, an unrunnable candidate, which is skipped here as well."""
    if not validation:
        return None
    return next((c for c in validation.get("candidates", []) if c["status"] == "ok"), None)


def _skipped(validation: dict[str, Any]) -> list[dict[str, Any]]:
    """The best-ranked candidates passed over because they could not run, with their reasons."""
    bad = [c for c in validation.get("candidates", []) if c["status"] != "ok"]
    bad += validation.get("rejected", [])
    return [{"config": c["config"], "status": c["status"], "reason": c.get("reason", "")} for c in bad]


def _backend(rows: pd.DataFrame) -> str | None:
    """The backend every row of a class was measured on (``numpy``, ``cupy``); None where mixed or unknown."""
    found = rows["backend"].dropna().unique() if "backend" in rows else []
    return str(found[0]) if len(found) == 1 else None


def _agreement(
    ok: pd.DataFrame, params: list[str], measured: list[dict[str, Any]], default: dict[str, Any]
) -> dict[str, Any]:
    """Whether the times the sweep recorded and the re-measured ones agree: each set's range (ms), and for
    configurations in both (the sweep's fastest rows, re-measured beside the model's picks) the median of
    recorded / re-measured. They disagree beyond their spread where every re-measured time lies outside the
    range the sweep recorded: then the two sets were not taken alike (load, other workers) and only one set
    ranks configurations fairly, the re-measured one, taken one configuration at a time."""
    again = [c["total_ms"] for c in measured]
    if default.get("status") == "ok":
        again.append(default["total_ms"])
    if not len(ok) or not again:
        return {"recorded_range_ms": None, "remeasured_range_ms": None, "times_disagree": False}
    lo, hi = float(ok["total_ms"].min()), float(ok["total_ms"].max())
    ratios = []
    for c in measured:
        if not c.get("recorded"):
            continue
        same = ok
        for p in params:
            same = same[same[p] == c["config"].get(p)]
        if len(same):
            ratios.append(float(same["total_ms"].median()) / c["total_ms"])
    return {
        "recorded_range_ms": [lo, hi],
        "remeasured_range_ms": [float(min(again)), float(max(again))],
        "times_disagree": bool(max(again) < lo or min(again) > hi),
        "recorded_over_remeasured": float(np.median(ratios)) if ratios else None,
    }


def class_summary(
    frame: pd.DataFrame,
    cls: str,
    plan: PlanFacts,
    metrics: Metrics,
    validation: dict[str, Any] | None,
    ok: pd.DataFrame | None = None,
    remeasured: bool = True,
) -> dict[str, Any]:
    """One class's line of the report; ``ok``: its ok rows where the caller has them (``ok_rows``);
    ``remeasured``: whether the sweep re-measures its pick (``SweepSpec.remeasures``)."""
    rows = frame[frame["gpu_class"] == cls]
    ok = ok_rows(frame, cls) if ok is None else ok
    counts = rows["status"].value_counts()
    objective = dict(plan.get("objective") or {"minimize": "time"})
    params = plan["params"]
    out: dict[str, Any] = {
        "samples": int(len(rows)),
        "ok": int(counts.get("ok", 0)),
        "invalid": int(counts.get("invalid", 0)),
        "failed": int(counts.get("failed", 0)),
        "device_name": str(rows["device_name"].iloc[0]) if len(rows) else None,
        "device_class": sorted(rows["device_class"].unique().tolist()),
        "backend": _backend(rows),
        "objective": objective,
    }
    energy = energy_summary(energy_rows(frame, cls), params)
    if energy is not None:
        out["energy"] = energy
    group = metrics.get("groups", {}).get(cls, {})
    models = group.get("models", {})
    mlp = models.get("mlp", {})
    out.update(r2_train=mlp.get("r2_train"), r2_test=mlp.get("r2_test"), mse_test=mlp.get("mse_test"))
    out["models"] = {
        n: {k: m[k] for k in ("r2_train", "r2_test", "mse_test", "fit_seconds")} for n, m in models.items()
    }
    out["search_model"] = group.get("search_model")
    if len(ok):
        cost = cost_column(list(ok.columns))  # the objective's cost, lower is better (time by default)
        best = ok.loc[ok[cost].idxmin()]
        out["best_sampled_ms"] = float(best[cost])
        out["best_sampled_config"] = _config(best, params)
        out["best_sampled_time_ms"] = float(best["total_ms"]) if "total_ms" in best else None
    else:
        out["best_sampled_ms"], out["best_sampled_config"] = None, None
    v = (validation or {}).get(cls)
    top = first_runnable(v)
    if v and top is not None:
        out.update(_remeasured(v, top, ok, params, out["backend"], objective))
    else:
        out.update(
            predicted_best_config=None,
            predicted_best_predicted_ms=None,
            predicted_best_measured_ms=None,
            default_config=plan.get("default"),
            default_measured_ms=None,
            best_remeasured_ms=None,
            speedup_over_default=None,
            note=("no re-measurement: validation.json is missing" if remeasured else NOT_REMEASURED)
            if not v
            else "no re-measured candidate ran: " + "; ".join(c["reason"] for c in _skipped(v)),
        )
    return out


def _remeasured(
    v: dict[str, Any],
    top: dict[str, Any],
    ok: pd.DataFrame,
    params: list[str],
    backend: str | None,
    objective: dict[str, str],
) -> dict[str, Any]:
    """A class's report lines on its re-measurement ``v`` (``validation.json``'s entry): the pick ``top``
    against the default, each one's cost and time, whether the recorded and re-measured times agree, and
    the comparison in words."""
    out: dict[str, Any] = {}
    default = v["default"]
    out["predicted_best_config"] = top["config"]
    out["predicted_best_predicted_ms"] = top["predicted_ms"]
    out["predicted_best_measured_ms"] = _cost(top) if top["status"] == "ok" else None
    out["predicted_best_status"] = top["status"]
    out["predicted_best_skipped"] = _skipped(v)
    out["default_config"] = default["config"]
    out["default_measured_ms"] = _cost(default) if default["status"] == "ok" else None
    # each one's time beside its objective's cost (the same number where the objective is time)
    out["predicted_best_time_ms"] = top.get("total_ms") if top["status"] == "ok" else None
    out["default_time_ms"] = default.get("total_ms") if default["status"] == "ok" else None
    measured = [c for c in v["candidates"] if c["status"] == "ok"]
    out["best_remeasured_ms"] = min((x for x in map(_cost, measured) if x is not None), default=None)
    out.update(_agreement(ok, params, measured, default))
    a, b = out["default_measured_ms"], out["predicted_best_measured_ms"]
    out["speedup_over_default"] = a / b if a and b else None
    out["remeasure_repeats"] = v.get("repeats")
    out["backend"] = v.get("backend") or (v.get("device") or {}).get("backend") or backend
    out["comparison"] = v.get("comparison")
    out["pick_is_default"] = top["config"] == default["config"]
    out["speedup_text"] = speedup_text(out["comparison"], out["backend"], out["pick_is_default"], objective)
    if v.get("search"):
        out["search"] = v["search"]
    return out


def tuning_entry(
    frame: pd.DataFrame,
    cls: str,
    spec,
    plan: PlanFacts,
    validation: dict | None,
    ok: pd.DataFrame | None = None,
) -> tuning_table.TableEntry:
    """Best measured configuration and the next few for one class, the tuning table's row for it
    (``kernels.tuning_table``: the C header, ``pick_for_device`` and the runtime autotuner read it); ``ok``:
    its ok rows where the caller has them."""
    params = plan["params"]
    candidates = []
    v = (validation or {}).get(cls)
    if v:
        for c in v["candidates"]:
            if c["status"] == "ok":
                candidates.append({"config": c["config"], "ms": _cost(c), "source": "remeasured"})
    ok = ok_rows(frame, cls) if ok is None else ok
    cost = cost_column(list(ok.columns))
    for _, row in ok.nsmallest(TOP_CANDIDATES, cost).iterrows():
        candidates.append({"config": _config(row, params), "ms": float(row[cost]), "source": "sampled"})
    # Where the two sets of times disagree beyond their spread (``_agreement``), they do not rank against each
    # other: the re-measured candidates come first, by their own times, then the sampled rows.
    measured = [c for c in (v or {}).get("candidates", []) if c["status"] == "ok"]
    apart = bool(v and _agreement(ok, params, measured, v["default"])["times_disagree"])
    seen, unique = set(), []
    for c in sorted(candidates, key=lambda c: (apart and c["source"] != "remeasured", c["ms"])):
        key = tuple(sorted(c["config"].items()))
        if key not in seen:
            seen.add(key)
            unique.append(c)
    default_ms = _cost(v["default"]) if v and v["default"]["status"] == "ok" else None
    # Each kernel's (blocks, threads) ranked by its own measured time: the median over the rows sharing them,
    # from the per-kernel grids where the spec asked for them, else from the random samples (each kernel is
    # timed in every sample, so 8,000 samples give ~70 timings per pair of a 120-pair grid).
    per_kernel = {}
    pk = ok[ok["sampler"] == "per_kernel_exhaustive"]
    for kernel, names in kernel_params(params).items():
        col = kernel_column(kernel)
        if col not in ok:
            continue
        rows = pk if pk[col].notna().any() else ok
        rows = rows.dropna(subset=[col])
        if rows.empty:
            continue
        ranked = rows.groupby(names)[col].agg(["median", "size"]).sort_values("median").head(TOP_CANDIDATES)
        per_kernel[kernel] = [
            {
                **{n: int(v) for n, v in zip(names, key if isinstance(key, tuple) else (key,), strict=True)},
                "ms": float(r["median"]),
                "n": int(r["size"]),
            }
            for key, r in ranked.iterrows()
        ]
    return {
        "gpu_class": cls,
        "workload": spec.workload,
        "case": spec.case,
        "size": spec.size,
        "source": "sweep",
        "best": unique[0]["config"] if unique else plan["default"],
        "best_ms": unique[0]["ms"] if unique else None,
        "default": plan["default"],
        "default_ms": default_ms,
        "candidates": unique[:TOP_CANDIDATES],
        "per_kernel": per_kernel,
        # what "ms" above is: the objective's cost (lower is better; time where none is stated)
        "objective": dict(plan.get("objective") or {"minimize": "time"}),
    }


def _figures(
    sweep_dir: Path,
    frame: pd.DataFrame,
    plan: PlanFacts,
    spec,
    metrics: Metrics,
    log,
    models: dict[str, dict[str, Any]] | None = None,
) -> list[str]:
    folder = SweepFolder(sweep_dir)
    folder.figures_dir.mkdir(exist_ok=True)
    groups = {g: e for g, e in metrics.get("groups", {}).items() if "mlp" in e.get("models", {})}
    measured = {str(c): energy_rows(frame, str(c)) for c in sorted(frame["gpu_class"].unique())}
    measured = {c: rows for c, rows in measured.items() if len(rows)}
    traces = search_traces(sweep_dir, frame)
    if not (groups or measured or traces):
        return []  # nothing to draw: matplotlib (a third of a second) is not even imported
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from . import figures, predictions
    except ImportError:
        log("matplotlib is not installed: figures skipped")
        return []

    sweep = Sweep(path=sweep_dir, spec=spec, plan=plan, frame=frame, metrics=metrics)
    made = []
    for group, entry in groups.items():
        drawn = {
            f"{group}-pred-vs-actual.png": figures.pred_vs_actual(
                predictions(sweep, group, "mlp", fitted=(models or {}).get(group, {}).get("mlp")),
                f"{group} mlp",
                unit=time_label(spec.workload),
            )
        }
        curve = entry["models"]["mlp"].get("loss_curve") or []
        held_out = entry["models"]["mlp"].get("held_out_loss_curve") or []
        if curve:
            drawn[f"{group}-loss.png"] = figures.loss_history(
                {group: np.asarray(curve)},
                f"{group} MLP loss: training and held-out rows",
                held_out={group: np.asarray(held_out)} if held_out else None,
            )
        for name, fig in drawn.items():
            fig.savefig(folder.figure_path(name), dpi=110)
            plt.close(fig)
            made.append(name)
    if measured:  # rows measured for energy too: the time-energy front per class
        fronts = {c: pareto_front(r["total_ms"], r["energy_mJ"]) for c, r in measured.items()}
        fig = figures.energy_front(measured, fronts, "time and energy per launch")
        fig.savefig(folder.figure_path("energy_front.png"), dpi=110)
        plt.close(fig)
        made.append("energy_front.png")
    if traces:
        strategy = spec.search.strategy if spec.search else "search"
        unit = time_label(spec.workload)
        goal = from_dict(plan.get("objective"))
        if not goal.is_time:  # the traces hold costs: drawn in the objective's own unit and direction

            def shown(costs: pd.Series) -> pd.Series:
                return pd.Series([goal.value(c) for c in costs], index=costs.index, dtype=float)

            traces = {c: t.assign(ms=shown(t["ms"]), best_ms=shown(t["best_ms"])) for c, t in traces.items()}
            unit = goal.unit if goal.unit == goal.name else f"{goal.name} ({goal.unit})"
        fig = figures.search_trace(traces, f"{strategy}: best so far", unit=unit)
        fig.savefig(folder.figure_path("search_trace.png"), dpi=110)
        plt.close(fig)
        made.append("search_trace.png")
    return made


def build_report(
    sweep_dir: Path,
    log: Callable[[str], Any] = logger.info,
    frame: pd.DataFrame | None = None,
    models: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Write the report files. Where the caller holds them (``combine``, which has just written and trained
    them): ``frame``, the merged rows; ``models``, the fitted models by group (else read from their files)."""
    folder = SweepFolder(sweep_dir)
    spec, plan = folder.read_spec()
    frame = load_merged(sweep_dir) if frame is None else frame
    metrics = folder.read_metrics()
    if metrics is None and spec.trains():
        raise UserError(f"{sweep_dir}: no trained models (run `launchtune train {sweep_dir}` first)")
    if metrics is None:  # a sweep that trains no models (``train_models``): its report is its rows' pick
        metrics = Metrics(groups={}, data_hash=data_hash(frame))
    validation = folder.read_validation()
    timing = folder.read_timing()
    classes = sorted(frame["gpu_class"].unique())
    by_class = rows_by_class(ok_rows(frame, None))  # filtered once for every class's lines
    report = {
        "sweep_id": spec.name,
        "workload": spec.workload,
        "case": spec.case,
        "size": spec.size,
        "seed": spec.seed,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "data_hash": metrics.get("data_hash"),
        "spec": spec.to_dict(),
        "merged_rows": int(len(frame)),
        "parameters": len(plan["params"]),  # what the models' rows per parameter are counted against
        "time_label": time_label(spec.workload),
        "throughput": timing,
        "classes": {
            c: class_summary(frame, c, plan, metrics, validation, by_class.get(c), spec.remeasures())
            for c in classes
        },
        "models": {
            g: {
                n: {k: m[k] for k in ("r2_train", "r2_test", "mse_test", "n_train") if k in m}
                for n, m in e["models"].items()
            }
            for g, e in metrics["groups"].items()
        },
        "comparison": metrics.get("comparison"),
        "loco": metrics.get("loco"),
        "pairs": metrics.get("pairs"),
        "combined_from": (folder.read_meta() or {}).get("combined", {}).get("sources"),
    }
    report["figures"] = _figures(sweep_dir, frame, plan, spec, metrics, log, models)
    if folder.performance_report.exists():
        report["performance_report"] = folder.performance_report.name
    table = tuning_table.new_doc(
        (tuning_entry(frame, c, spec, plan, validation, by_class.get(c)) for c in classes),
        created=report["created"],
        sweep_id=spec.name,
    )
    cross_class: list[str] = []
    if any(metrics.get(k) for k in ("comparison", "loco", "pairs")):  # what markdown() reads (scipy, sklearn)
        from ..learn.crossclass import markdown as cross_class_markdown

        cross_class = cross_class_markdown(metrics)
    markdown = render({**report, "cross_class_md": cross_class})
    folder.write_report(_clean(report), markdown, _clean(table))
    return report
