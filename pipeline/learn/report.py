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

from launchtune.kernels.autotune.table import (
    FORMAT as TABLE_FORMAT,
)  # one format, read by the runtime autotuner
from launchtune.kernels.compare import Comparison
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.learn.crossclass import markdown as cross_class_markdown
from launchtune.pipeline.results import Sweep, figures, predictions, search_traces, time_label
from launchtune.pipeline.sweep.folder import SweepFolder, ok_rows, rows_by_class
from launchtune.pipeline.sweep.schema import kernel_column, kernel_params
from launchtune.pipeline.sweep.shards import load_merged

logger = logging.getLogger(__name__)

TOP_CANDIDATES = 5
NUMPY_NOTE = "the numpy backend ignores launch parameters: no speed-up to report"
DEFAULT_NOTE = "the model picked the default itself: no speed-up to report"
COMPARISON_FIELDS = ("ratio", "low", "high", "verdict", "rounds", "confidence")


def speedup_text(
    comparison: dict[str, Any] | None, backend: str | None, pick_is_default: bool = False
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
    return (
        Comparison(**{k: comparison[k] for k in COMPARISON_FIELDS}).text() + " (time of the pick / default)"
    )


def remeasure_line(
    top: dict[str, Any], default: dict[str, Any], comparison: dict[str, Any] | None, backend: str
) -> str:
    """One console line for a class's re-measurement, times rounded to what the timer resolves."""

    def ms(m: dict[str, Any]) -> str:
        return f"{m['total_ms']:.4g} ms" if m.get("total_ms") is not None else m["status"]

    same = top.get("config") == default.get("config")
    what = "best (a row the sweep recorded)" if top.get("recorded") else "predicted best"
    return f"{what} {ms(top)}, default {ms(default)}; {speedup_text(comparison, backend, same)}"


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


def _numpy_note(cls: str, c: dict[str, Any]) -> str:
    """Why a CPU sweep's times do not rank launches: what the table's numbers are on the numpy backend."""
    times = [
        f"{what} {_fmt(c.get(key))} ms"
        for what, key in (
            ("best sampled", "best_sampled_ms"),
            ("default", "default_measured_ms"),
            ("predicted best", "predicted_best_measured_ms"),
        )
        if c.get(key) is not None
    ]
    return (
        f"**{cls}** ran on the numpy backend (a CPU), where launch parameters change nothing: every "
        "configuration does the same work, so the spread of its times"
        + (f" ({', '.join(times)})" if times else "")
        + " is this machine's timing noise (its load, caches, other jobs), not an effect of the launch, and "
        "the best sampled time can be slower than the default's. On a GPU (the CuPy backend) the same sweep "
        "measures what launches change."
    )


def class_summary(
    frame: pd.DataFrame,
    cls: str,
    plan: dict[str, Any],
    metrics: dict[str, Any],
    validation: dict[str, Any] | None,
    ok: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """One class's line of the report; ``ok``: its ok rows where the caller has them (``ok_rows``)."""
    rows = frame[frame["gpu_class"] == cls]
    ok = ok_rows(frame, cls) if ok is None else ok
    counts = rows["status"].value_counts()
    params = plan["params"]
    out: dict[str, Any] = {
        "samples": int(len(rows)),
        "ok": int(counts.get("ok", 0)),
        "invalid": int(counts.get("invalid", 0)),
        "failed": int(counts.get("failed", 0)),
        "device_name": str(rows["device_name"].iloc[0]) if len(rows) else None,
        "device_class": sorted(rows["device_class"].unique().tolist()),
        "backend": _backend(rows),
    }
    group = metrics.get("groups", {}).get(cls, {})
    models = group.get("models", {})
    mlp = models.get("mlp", {})
    out.update(r2_train=mlp.get("r2_train"), r2_test=mlp.get("r2_test"), mse_test=mlp.get("mse_test"))
    out["models"] = {
        n: {k: m[k] for k in ("r2_train", "r2_test", "mse_test", "fit_seconds")} for n, m in models.items()
    }
    out["search_model"] = group.get("search_model")
    if len(ok):
        best = ok.loc[ok["total_ms"].idxmin()]
        out["best_sampled_ms"] = float(best["total_ms"])
        out["best_sampled_config"] = _config(best, params)
    else:
        out["best_sampled_ms"], out["best_sampled_config"] = None, None
    v = (validation or {}).get(cls)
    top = first_runnable(v)
    if v and top is not None:
        default = v["default"]
        out["predicted_best_config"] = top["config"]
        out["predicted_best_predicted_ms"] = top["predicted_ms"]
        out["predicted_best_measured_ms"] = top.get("total_ms") if top["status"] == "ok" else None
        out["predicted_best_status"] = top["status"]
        out["predicted_best_skipped"] = _skipped(v)
        out["default_config"] = default["config"]
        out["default_measured_ms"] = default.get("total_ms") if default["status"] == "ok" else None
        measured = [c for c in v["candidates"] if c["status"] == "ok"]
        out["best_remeasured_ms"] = min((c["total_ms"] for c in measured), default=None)
        a, b = out["default_measured_ms"], out["predicted_best_measured_ms"]
        out["speedup_over_default"] = a / b if a and b else None
        out["remeasure_repeats"] = v.get("repeats")
        out["backend"] = v.get("backend") or (v.get("device") or {}).get("backend") or out["backend"]
        out["comparison"] = v.get("comparison")
        out["pick_is_default"] = top["config"] == default["config"]
        out["speedup_text"] = speedup_text(out["comparison"], out["backend"], out["pick_is_default"])
        if v.get("search"):
            out["search"] = v["search"]
    else:
        out.update(
            predicted_best_config=None,
            predicted_best_predicted_ms=None,
            predicted_best_measured_ms=None,
            default_config=plan.get("default"),
            default_measured_ms=None,
            best_remeasured_ms=None,
            speedup_over_default=None,
            note="no re-measurement: validation.json is missing"
            if not v
            else "no re-measured candidate ran: " + "; ".join(c["reason"] for c in _skipped(v)),
        )
    return out


def tuning_entry(
    frame: pd.DataFrame,
    cls: str,
    spec,
    plan: dict[str, Any],
    validation: dict | None,
    ok: pd.DataFrame | None = None,
) -> dict:
    """Best measured configuration and the next few for one class, for the runtime autotuner (``ok``: its
    ok rows where the caller has them)."""
    params = plan["params"]
    candidates = []
    v = (validation or {}).get(cls)
    if v:
        for c in v["candidates"]:
            if c["status"] == "ok":
                candidates.append({"config": c["config"], "ms": c["total_ms"], "source": "remeasured"})
    ok = ok_rows(frame, cls) if ok is None else ok
    for _, row in ok.nsmallest(TOP_CANDIDATES, "total_ms").iterrows():
        candidates.append({"config": _config(row, params), "ms": float(row["total_ms"]), "source": "sampled"})
    seen, unique = set(), []
    for c in sorted(candidates, key=lambda c: c["ms"]):
        key = tuple(sorted(c["config"].items()))
        if key not in seen:
            seen.add(key)
            unique.append(c)
    default_ms = v["default"].get("total_ms") if v and v["default"]["status"] == "ok" else None
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
    }


def _figures(
    sweep_dir: Path,
    frame: pd.DataFrame,
    plan: dict[str, Any],
    spec,
    metrics: dict,
    log,
    models: dict[str, dict[str, Any]] | None = None,
) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: figures skipped")
        return []

    folder = SweepFolder(sweep_dir)
    folder.figures_dir.mkdir(exist_ok=True)
    sweep = Sweep(path=sweep_dir, spec=spec, plan=plan, frame=frame, metrics=metrics)
    made = []
    for group, entry in metrics.get("groups", {}).items():
        if "mlp" not in entry.get("models", {}):
            continue
        drawn = {
            f"{group}-pred-vs-actual.png": figures.pred_vs_actual(
                predictions(sweep, group, "mlp", fitted=(models or {}).get(group, {}).get("mlp")),
                f"{group} mlp",
                unit=time_label(spec.workload),
            )
        }
        curve = entry["models"]["mlp"].get("loss_curve") or []
        if curve:
            drawn[f"{group}-loss.png"] = figures.loss_history(
                {group: np.asarray(curve)}, f"{group} MLP loss history"
            )
        for name, fig in drawn.items():
            fig.savefig(folder.figure_path(name), dpi=110)
            plt.close(fig)
            made.append(name)
    traces = search_traces(sweep_dir, frame)
    if traces:
        strategy = spec.search.strategy if spec.search else "search"
        fig = figures.search_trace(traces, f"{strategy}: best so far", unit=time_label(spec.workload))
        fig.savefig(folder.figure_path("search_trace.png"), dpi=110)
        plt.close(fig)
        made.append("search_trace.png")
    return made


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _speedup_cell(c: dict[str, Any]) -> str:
    """The table's cell: the interleaved ratio and its verdict, never a bare ratio read as a gain."""
    comp = c.get("comparison")
    if c.get("backend") == "numpy":
        return "n/a (numpy ignores launches)"
    if c.get("pick_is_default"):
        return "n/a (the pick is the default)"
    if comp:
        return f"{comp['ratio']:.3f} [{comp['low']:.3f}, {comp['high']:.3f}] {comp['verdict']}"
    return "n/a"


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Sweep `{report['sweep_id']}`",
        "",
        f"{report['workload']} / {report['case']} / {report['size']}, seed {report['seed']}, "
        f"created {report['created']}.",
        "",
    ]
    # The count comes from the merged data, not from the measuring run's log: a sample lost between the two
    # must show here, never be reported as measured.
    lines += [f"Measured {report['merged_rows']} configurations (the merged data).", ""]
    if report.get("throughput"):
        t = report["throughput"]
        lines += [
            f"The last measuring run measured {t['rows']} in {t['seconds']:.1f} s on {t['workers']} "
            f"worker(s): {t['samples_per_minute']:.1f} samples per minute.",
            "",
        ]
    lines += [
        "| class | samples | ok | invalid | failed | MLP R2 train | MLP R2 test | MLP MSE test "
        "| search model "
        "| best sampled ms | default ms | predicted best ms | pick / default [95%] |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for cls, c in report["classes"].items():
        lines.append(
            f"| {cls} | {c['samples']} | {c['ok']} | {c['invalid']} | {c['failed']} "
            f"| {_fmt(c['r2_train'], 3)} "
            f"| {_fmt(c['r2_test'], 3)} | {_fmt(c['mse_test'])} | {c.get('search_model') or 'n/a'} "
            f"| {_fmt(c['best_sampled_ms'])} | {_fmt(c['default_measured_ms'])} "
            f"| {_fmt(c['predicted_best_measured_ms'])} | {_speedup_cell(c)} |"
        )
    for cls, c in report["classes"].items():
        if c.get("backend") == "numpy":
            lines += ["", _numpy_note(cls, c)]
    lines += [
        "",
        "## Models (R2 on the held-out split)",
        "",
        "| group | model | rows fitted | R2 train | R2 test | MSE test |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for group, models in report["models"].items():
        for name, m in models.items():
            lines.append(
                f"| {group} | {name} | {_fmt(m.get('n_train'))} | {_fmt(m['r2_train'], 3)} "
                f"| {_fmt(m['r2_test'], 3)} | {_fmt(m['mse_test'])} |"
            )
    for cls, c in report["classes"].items():
        if c.get("predicted_best_config"):
            cfg = ", ".join(f"{k}={v}" for k, v in c["predicted_best_config"].items())
            lines += ["", f"**{cls}** predicted best ({c['search_model']}): {cfg}"]
            if c.get("predicted_best_skipped"):
                why = "; ".join(f"{s['status']}: {s['reason']}" for s in c["predicted_best_skipped"])
                lines += [
                    "",
                    f"Better-ranked candidates that could not run were skipped "
                    f"({len(c['predicted_best_skipped'])}): {why}",
                ]
        if c.get("search"):
            se = c["search"]
            lines += [
                "",
                f"**{cls}** searched by `{se['strategy']}`: {se['measured']} of a budget of {se['budget']} "
                f"measurements on {se['workers']} worker(s), seed {se['seed']}; its pick (the fastest it "
                f"measured, {_fmt(se['best_ms'])} ms then) re-measured with the runners-up above; the trace: "
                "figures/search_trace.png.",
            ]
            if se.get("p_faster") is not None:
                lines[-1] += (
                    " The search's estimate of the chance that a configuration at least 5% faster than its "
                    f"pick remains unmeasured: {se['p_faster']:.2f} (where it is high, a larger budget may "
                    "pay; its calibration: docs/strategies.md)."
                )
        if c.get("speedup_text"):
            lines += ["", f"**{cls}** predicted best against the default: {c['speedup_text']}."]
    if report.get("combined_from"):
        lines += [
            "",
            "This folder combines sweeps measured elsewhere (`launchtune combine`); nothing was "
            "re-measured here: the predicted-best and default times are each source's own re-measurement "
            "(its own model's pick), from: "
            + ", ".join(f"{', '.join(s['classes'])} `{s['path']}`" for s in report["combined_from"])
            + ".",
        ]
    lines += report.get("cross_class_md", [])
    if report.get("performance_report"):
        lines += [
            "",
            f"Dask performance report of the measuring run (task stream, profiles, worker use): "
            f"[{report['performance_report']}]({report['performance_report']}).",
        ]
    if report["figures"]:
        lines += ["", "## Figures", ""] + [f"![{f}](figures/{f})" for f in report["figures"]]
    return "\n".join(lines) + "\n"


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
    if metrics is None:
        raise UserError(f"{sweep_dir}: no trained models (run `launchtune train {sweep_dir}` first)")
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
        "throughput": timing,
        "classes": {c: class_summary(frame, c, plan, metrics, validation, by_class.get(c)) for c in classes},
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
    table = {
        "format": TABLE_FORMAT,
        "version": 1,
        "created": report["created"],
        "sweep_id": spec.name,
        "entries": [tuning_entry(frame, c, spec, plan, validation, by_class.get(c)) for c in classes],
    }
    markdown = _markdown({**report, "cross_class_md": cross_class_markdown(metrics)})
    folder.write_report(_clean(report), markdown, _clean(table))
    return report
