"""Train the surrogates per GPU class and combined, on one seeded 75/25 split per class; save them with skops.

Per class the features are the launch parameters; combined, the device facts are added so one model can tell
the classes apart: Table 4 of the CFD seed (peak FP64, bandwidth, memory), the SM count and the copy bandwidth
measured on the worker. Each class is split on its own with the same seed and the combined model trains on the
union of the classes' training rows, so both are scored on exactly the same test rows (the seed's Figs. 12-14
comparison, ``pipeline.learn.crossclass``); with two classes or more, leave-one-class-out is scored as well.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import sklearn
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import mean_squared_error, r2_score

from ..store.folder import PlanFacts, SweepFolder, data_hash, ok_rows, rows_by_class
from ..store.schema import cost_column, kernel_column, kernel_params
from ..store.shards import load_merged
from ..store.spec import SweepSpec
from .crossclass import cross_class
from .design import (
    MIN_ROWS,
    design,
    device_features,
    features_for,
    group_split,
    model_makers,
    training_rows,
    with_class_facts,
)
from .models import (
    AdditiveKernelModel,
    held_out_curve,
    loss_curve,
    one_thread,
    save_model,
)
from .parallel import run_fits

logger = logging.getLogger(__name__)


def _score(model: Any, X: np.ndarray, y: np.ndarray, tr: np.ndarray, te: np.ndarray, seconds: float) -> dict:
    p_tr, p_te = model.predict(X[tr]), model.predict(X[te])
    # the held-out split's loss per epoch beside the training loss, so an over-fit shows on the loss figure
    _, held_out = held_out_curve(model, X[tr], y[tr], X[te], y[te])
    return {
        "r2_train": float(r2_score(y[tr], p_tr)),
        "r2_test": float(r2_score(y[te], p_te)),
        "mse_train": float(mean_squared_error(y[tr], p_tr)),
        "mse_test": float(mean_squared_error(y[te], p_te)),
        "n_train": int(len(tr)),
        "n_test": int(len(te)),
        "fit_seconds": round(seconds, 3),
        "loss_curve": loss_curve(model),
        "held_out_loss_curve": held_out,
    }


def fit_models(
    rows: pd.DataFrame,
    plan: PlanFacts,
    spec: SweepSpec,
    combined: bool,
    features: list[str] | None = None,
) -> dict[str, Any]:
    """Fit every model on one split of ``rows``; returns {name: (model, metrics)}."""
    features = features or features_for(plan, combined)
    # the objective's cost where the rows have one (lower is better; time by default): what is fitted
    X, y = design(rows, features), rows[cost_column(list(rows.columns))].to_numpy(float)
    tr, te = group_split(rows, spec.test_fraction, spec.seed)
    out = {}
    for name, make in model_makers(spec, len(tr), combined, features, plan.get("inactive", ())).items():
        model = make()
        t0 = time.perf_counter()
        model.fit(X[tr], y[tr])
        out[name] = (model, _score(model, X, y, tr, te, time.perf_counter() - t0))
    kernel_cols = [kernel_column(k) for k in plan["kernels"]]
    groups = {
        k: [features.index(p) for p in ps]
        for k, ps in kernel_params(plan["params"]).items()
        if k in plan["kernels"]
    }
    if (
        not combined
        and groups
        and all(c in rows for c in kernel_cols)
        and rows[kernel_cols].notna().all().all()
    ):
        model = AdditiveKernelModel(groups=groups)
        times = rows[[kernel_column(k) for k in groups]].to_numpy(float)
        t0 = time.perf_counter()
        model.fit(X[tr], y[tr], kernel_times=times[tr])
        out["additive"] = (model, _score(model, X, y, tr, te, time.perf_counter() - t0))
    return out


def train_sweep(
    sweep_dir: Path, log: Callable[[str], Any] = logger.info, merged: pd.DataFrame | None = None
) -> dict[str, Any]:
    """Train per class and combined; write ``models/<class>/<model>.skops`` and ``models/metrics.json``.

    ``merged``: the folder's merged rows where the caller holds them already (``combine`` has just written
    them), as ``load_merged`` reads them; otherwise read here."""
    folder = SweepFolder(sweep_dir)
    spec, plan = folder.read_spec()
    merged = load_merged(sweep_dir) if merged is None else merged
    frame, used = training_rows(merged, spec.train.max_rows, spec.seed)
    ok = ok_rows(with_class_facts(frame), None)  # filtered once: every group and score reads these rows
    by_class = rows_by_class(ok)
    for cls, n in used["per_class"].items():
        if n["used"] < n["ok_rows"]:
            log(f"train {cls}: {n['used']} of {n['ok_rows']} ok rows, drawn with seed {spec.seed} (max_rows)")
    classes = sorted(by_class)
    groups: dict[str, str | None] = {c: c for c in classes}
    groups["combined"] = None
    metrics: dict[str, Any] = {
        "data_hash": data_hash(merged),
        "training_rows": used,
        "seed": spec.seed,
        "test_fraction": spec.test_fraction,
        "versions": {"sklearn": sklearn.__version__, "skops": version("skops"), "numpy": np.__version__},
        "groups": {},
    }
    trained: dict[str, dict[str, Any]] = {}
    with one_thread():
        _fit_groups(folder, ok, by_class, plan, spec, groups, metrics, trained, log)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            metrics.update(cross_class(ok, by_class, spec, metrics["groups"], trained, log, merged))
    folder.write_metrics(_finite(metrics))
    return {"metrics": metrics, "models": trained}


def _fit_in_worker(
    rows: pd.DataFrame, plan: PlanFacts, spec: SweepSpec, combined: bool, features: list[str]
) -> dict[str, Any]:
    """``fit_models`` in a worker process, single-threaded (the numbers of a serial run)."""
    with one_thread(), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 200 epochs is the seed's budget, by design
        return fit_models(rows, plan, spec, combined=combined, features=features)


def _fit_groups(
    folder: SweepFolder,
    ok: pd.DataFrame,
    by_class: dict[str, pd.DataFrame],
    plan: PlanFacts,
    spec: SweepSpec,
    groups: dict[str, str | None],
    metrics: dict[str, Any],
    trained: dict[str, dict[str, Any]],
    log: Callable[[str], Any],
) -> None:
    """Fit every group (each class, and combined), save its models, record their scores in ``metrics``.

    The groups are independent, so they are fitted in parallel processes (``parallel.run_fits``: one per
    core, the largest first); each fit is seeded and single-threaded, so the numbers are a serial run's."""
    jobs = []
    for group, cls in groups.items():
        rows = ok if cls is None else by_class[cls]
        features = features_for(plan, False)
        entry: dict[str, Any] = {"features": features, "rows": int(len(rows)), "target": "ms", "models": {}}
        metrics["groups"][group] = entry
        if cls is None:
            used, dropped = device_features(rows)
            features = features + used
            entry.update(features=features, target="log(ms)", split="each class on its own, same seed")
            if dropped:
                entry["dropped_features"] = dropped
                for f, why in dropped.items():
                    log(f"train combined: device feature {f} left out: {why}")
        if len(rows) < MIN_ROWS:
            entry["skipped"] = f"only {len(rows)} ok samples (need {MIN_ROWS})"
            log(f"train {group}: skipped, {entry['skipped']}")
            continue
        jobs.append((group, rows, cls is None, features))
    if not jobs:
        return
    log(f"training {', '.join(group for group, *_ in jobs)}")

    def logged(i: int, fitted: dict[str, Any]) -> None:
        scores = ", ".join(f"{n} R2 test {s['r2_test']:.3f}" for n, (_, s) in fitted.items())
        log(f"train {jobs[i][0]}: {scores}")

    results = run_fits(
        [(_fit_in_worker, (rows, plan, spec, combined, features)) for _, rows, combined, features in jobs],
        sizes=[len(rows) for _, rows, _, _ in jobs],  # the combined group, the largest, starts first
        phases=["train combined" if combined else "train per class" for _, _, combined, _ in jobs],
        done=logged,
    )
    for (group, *_), fitted in zip(jobs, results, strict=True):
        entry = metrics["groups"][group]
        for name, (model, score) in fitted.items():
            save_model(model, folder.model_path(group, name))
            entry["models"][name] = score
        entry["search_model"] = max(entry["models"], key=lambda n: entry["models"][n]["r2_test"])
        trained[group] = {n: m for n, (m, _) in fitted.items()}


def _finite(obj: Any) -> Any:
    """JSON has no NaN: a score that is undefined (a constant prediction's rank correlation) becomes null."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj
