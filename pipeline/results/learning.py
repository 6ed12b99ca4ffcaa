"""The surrogate models of a sweep folder: R2 tables, loss curves, predictions (refitted as ``train`` does
when no model file is there), the combined-vs-per-class comparison, leave-one-class-out and each class's
measured times against every other's.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import r2_score
from threadpoolctl import threadpool_limits

from ..errors import UserError
from ..learn.design import design, features_for, group_split, model_makers, with_class_facts
from ..learn.models import load_model
from ..store.folder import SweepFolder
from ..store.schema import cost_column
from .sweeps import Sweep


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
    than one class (in a one-class folder it is the same rows with constant device columns); none where the
    folder's rows are not here (no ``merged/``)."""
    if not sweep.has_rows:
        return []
    groups = [g for g, e in (sweep.metrics or {}).get("groups", {}).items() if e.get("models")]
    return [g for g in groups if g in sweep.classes or (g == "combined" and sweep.combined)]


def group_model(sweep: Sweep, group: str, model: str = "mlp") -> Any:
    """The fitted model of a group: its skops file where the folder has one, else refitted as ``python -m
    pipeline train`` fits it (same rows, features, split, seed and model settings), in memory only.

    Refitting keeps the committed data small (model files are not committed) at the cost of a few seconds
    for the MLP; the refitted model's R2 is the one in ``metrics.json``.
    """
    file = SweepFolder(sweep.path).model_path(group, model)
    if file.is_file():
        return load_model(file)
    _, X, y, tr, _ = _group_design(sweep, group)
    features = (sweep.metrics or {}).get("groups", {}).get(group, {}).get("features") or []
    makers = model_makers(sweep.spec, len(tr), group == "combined", features, sweep.plan.get("inactive", ()))
    if model not in makers:
        raise UserError(f"{file}: missing, and only {', '.join(makers)} can be refitted here")
    # One thread (BLAS, OpenMP): the MLP's matrices are small, and on a shared 2-core machine threads spinning
    # against other processes made this fit 14x slower (129 s against 9 s), with the same result.
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore", ConvergenceWarning)  # 200 epochs is the seed's budget, as in train
        return makers[model]().fit(X[tr], y[tr])


def _group_design(sweep: Sweep, group: str):
    """Rows, design matrix, target and the train/test positions of a group, as training made them."""
    entry = (sweep.metrics or {}).get("groups", {}).get(group)
    if entry is None:
        raise UserError(f"{sweep.path}: models/metrics.json has no group {group!r}")
    if not sweep.has_rows:
        raise UserError(f"{sweep.path}: no merged/ here, so no rows to predict")
    if group != "combined" and group not in sweep.classes:
        raise UserError(f"{sweep.path}: group {group!r} is neither a GPU class of the data nor 'combined'")
    rows = with_class_facts(sweep.ok(None if group == "combined" else group))
    features = entry.get("features") or features_for(sweep.plan, group == "combined")
    missing = [f for f in features if f not in rows]
    if missing:
        raise UserError(
            f"{sweep.path}: group {group!r} was trained on {missing[0]!r}, not in the merged data"
        )
    tr, te = group_split(rows, sweep.spec.test_fraction, sweep.spec.seed)
    return rows, design(rows, features), rows[cost_column(list(rows.columns))].to_numpy(float), tr, te


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
    Spearman's rho; the ``comparison`` block ``launchtune train`` writes for a folder of several
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
    R2, rank correlation and what the prediction would pick (its measured time over the class's best); where
    ``combine`` recorded them, also whether that pick is within 10% of the optimum and why a miss is likely
    (``within_10pct``, ``why_not``). Empty without a ``loco`` block."""
    loco = (metrics or {}).get("loco") or {}
    extra = [k for k in ("within_10pct", "why_not") if any(k in e or _in_models(e, k) for e in loco.values())]
    rows = []
    for held, entry in loco.items():
        for name, m in (entry.get("models") or {}).items():
            more = {k: m.get(k, entry.get(k)) for k in extra}
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
                    **more,
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
            *extra,
        ],
    )


def _in_models(entry: dict[str, Any], key: str) -> bool:
    return any(key in m for m in (entry.get("models") or {}).values())


def pairs_table(metrics: dict[str, Any]) -> pd.DataFrame:
    """Each class against every other on their measured times, no model (the ``pairs`` block of a folder of
    several classes): Spearman's rho on the configurations both measured (``shared``), and what the other
    class's best configuration costs on this one (its time there over this class's best; empty where it has
    no ok row of it, ``note`` says why). One row per (gpu_class, other); empty without a ``pairs`` block."""
    rows = [
        {
            "gpu_class": cls,
            "other": other,
            "shared": p.get("shared"),
            "spearman": p.get("spearman"),
            "other_best_here_over_best": p.get("best_of_other_ratio"),
            "note": p.get("best_of_other_note", ""),
        }
        for cls, others in sorted(((metrics or {}).get("pairs") or {}).items())
        for other, p in sorted(others.items())
    ]
    return pd.DataFrame(
        rows, columns=["gpu_class", "other", "shared", "spearman", "other_best_here_over_best", "note"]
    )
