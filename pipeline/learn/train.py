"""Train the surrogates per GPU class and combined, on one seeded 75/25 split per class; save them with skops.

Per class the features are the launch parameters; combined, the device facts are added so one model can tell
the classes apart: Table 4 of the CFD seed (peak FP64, bandwidth, memory), the SM count and the copy bandwidth
measured on the worker. Each class is split on its own with the same seed and the combined model trains on the
union of the classes' training rows, so both are scored on exactly the same test rows (the seed's Figs. 12-14
comparison, ``pipeline.learn.crossclass``); with two classes or more, leave-one-class-out is scored as well.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import mean_squared_error, r2_score
from sklearn.model_selection import train_test_split

from pipeline.errors import UserError
from pipeline.learn.models import AdditiveKernelModel, loss_curve, make_gbr, make_mlp, save_model
from pipeline.sweep.schema import kernel_column, kernel_params
from pipeline.sweep.shards import load_merged
from pipeline.sweep.spec import SweepSpec

DEVICE_FEATURES = [
    "peak_fp64_gflops",
    "spec_bandwidth_gbs",
    "spec_memory_gb",
    "sm_count",
    "measured_bandwidth_gbs",
]
# Spec-sheet figures: null where a class has no sheet (the CPU); it reads 0, a level of its own.
SPEC_SHEET_FEATURES = {"peak_fp64_gflops", "spec_bandwidth_gbs", "spec_memory_gb"}
# Anything else null means "not measured" (rows older than the column): 0 would claim a value, so such a
# feature is left out of the combined fit and the reason recorded in metrics.json.
MIN_ROWS = 8


def read_sweep(sweep_dir: Path) -> tuple[SweepSpec, dict[str, Any]]:
    """The spec a sweep folder was made with and its plan facts (parameters, values, default, kernels)."""
    meta = sweep_dir / "sweep.json"
    if not meta.is_file():
        raise UserError(
            f"{sweep_dir}: not a sweep folder (no sweep.json; run `python -m pipeline sweep` first)"
        )
    try:
        data = json.loads(meta.read_text())
        return SweepSpec.from_dict(data["spec"]), data["plan"]
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{meta}: unreadable sweep description ({exc})") from None


def split(frame: pd.DataFrame, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row positions of the train and test sets; the same call in the report gives the same split."""
    return train_test_split(np.arange(len(frame)), test_size=test_fraction, random_state=seed)


def ok_rows(frame: pd.DataFrame, gpu_class: str | None) -> pd.DataFrame:
    rows = frame[(frame["status"] == "ok") & frame["total_ms"].notna()]
    if gpu_class is not None:
        rows = rows[rows["gpu_class"] == gpu_class]
    return rows.sort_values(["gpu_class", "sample_id"]).reset_index(drop=True)


def features_for(plan: dict[str, Any], combined: bool) -> list[str]:
    """Every feature a group may use; ``device_features`` says which of the device facts the data has."""
    return list(plan["params"]) + (DEVICE_FEATURES if combined else [])


def device_features(rows: pd.DataFrame) -> tuple[list[str], dict[str, str]]:
    """The device facts usable on ``rows`` and, for each left out, why."""
    used, dropped = [], {}
    for f in DEVICE_FEATURES:
        if f not in rows:
            dropped[f] = "not in the data (measured before the column existed)"
        elif f not in SPEC_SHEET_FEATURES and rows[f].isna().any():
            missing = sorted(rows.loc[rows[f].isna(), "gpu_class"].unique())
            dropped[f] = f"not measured for {', '.join(missing)}"
        else:
            used.append(f)
    return used, dropped


def group_split(rows: pd.DataFrame, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row positions of the train and test sets, each class split on its own with the same seed.

    A class's rows (``ok_rows`` order) get the same split here as in their own group, so the combined model's
    test rows of class C are exactly C's per-class test rows. For one class this is ``split``. A class with
    fewer than ``MIN_ROWS`` rows (its own group is skipped) goes wholly to training; if every class is that
    small, the rows are split together.
    """
    if (rows.groupby("gpu_class").size() < MIN_ROWS).all():
        return split(rows, test_fraction, seed)
    train, test = [], []
    for pos in rows.groupby("gpu_class", sort=True).indices.values():
        if len(pos) < MIN_ROWS:
            train.append(pos)
            continue
        tr, te = split(rows.iloc[pos], test_fraction, seed)
        train.append(pos[tr])
        test.append(pos[te])
    return np.concatenate(train), np.concatenate(test)


def model_makers(spec: SweepSpec, n_train: int, combined: bool) -> dict[str, Any]:
    """The models a group fits. Combined ones learn log(time): classes may differ by orders of magnitude."""
    return {
        "mlp": lambda: make_mlp(
            spec.train.hidden_layers, spec.train.max_epochs, spec.seed, n_train, log_target=combined
        ),
        "gbr": lambda: make_gbr(spec.seed, log_target=combined),
    }


def design(rows: pd.DataFrame, features: list[str]) -> np.ndarray:
    return rows[features].astype(float).fillna(0.0).to_numpy()


def data_hash(frame: pd.DataFrame) -> str:
    return hashlib.sha256(
        pd.util.hash_pandas_object(frame.drop(columns=["timestamp"]), index=False).values.tobytes()
    ).hexdigest()[:16]


def _score(model: Any, X: np.ndarray, y: np.ndarray, tr: np.ndarray, te: np.ndarray, seconds: float) -> dict:
    p_tr, p_te = model.predict(X[tr]), model.predict(X[te])
    return {
        "r2_train": float(r2_score(y[tr], p_tr)),
        "r2_test": float(r2_score(y[te], p_te)),
        "mse_train": float(mean_squared_error(y[tr], p_tr)),
        "mse_test": float(mean_squared_error(y[te], p_te)),
        "n_train": int(len(tr)),
        "n_test": int(len(te)),
        "fit_seconds": round(seconds, 3),
        "loss_curve": loss_curve(model),
    }


def fit_models(
    rows: pd.DataFrame,
    plan: dict[str, Any],
    spec: SweepSpec,
    combined: bool,
    features: list[str] | None = None,
) -> dict[str, Any]:
    """Fit every model on one split of ``rows``; returns {name: (model, metrics)}."""
    features = features or features_for(plan, combined)
    X, y = design(rows, features), rows["total_ms"].to_numpy(float)
    tr, te = group_split(rows, spec.test_fraction, spec.seed)
    out = {}
    for name, make in model_makers(spec, len(tr), combined).items():
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


def train_sweep(sweep_dir: Path, log=print) -> dict[str, Any]:
    """Train per class and combined; write ``models/<class>/<model>.skops`` and ``models/metrics.json``."""
    import warnings

    import sklearn
    import skops
    from sklearn.exceptions import ConvergenceWarning

    from pipeline.learn.crossclass import cross_class

    spec, plan = read_sweep(sweep_dir)
    frame = load_merged(sweep_dir)
    classes = sorted(frame["gpu_class"].unique())
    groups: dict[str, str | None] = {c: c for c in classes}
    groups["combined"] = None
    metrics: dict[str, Any] = {
        "data_hash": data_hash(frame),
        "seed": spec.seed,
        "test_fraction": spec.test_fraction,
        "versions": {"sklearn": sklearn.__version__, "skops": skops.__version__, "numpy": np.__version__},
        "groups": {},
    }
    trained: dict[str, dict[str, Any]] = {}
    for group, cls in groups.items():
        rows = ok_rows(frame, cls)
        features = features_for(plan, False)
        entry: dict[str, Any] = {"features": features, "rows": int(len(rows)), "target": "ms", "models": {}}
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
            metrics["groups"][group] = entry
            log(f"train {group}: skipped, {entry['skipped']}")
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # 200 epochs is the seed's budget, by design
            fitted = fit_models(rows, plan, spec, combined=cls is None, features=features)
        for name, (model, score) in fitted.items():
            save_model(model, sweep_dir / "models" / group / f"{name}.skops")
            entry["models"][name] = score
        entry["search_model"] = max(entry["models"], key=lambda n: entry["models"][n]["r2_test"])
        metrics["groups"][group] = entry
        trained[group] = {n: m for n, (m, _) in fitted.items()}
        log(
            f"train {group}: "
            + ", ".join(f"{n} R2 test {s['r2_test']:.3f}" for n, s in entry["models"].items())
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        metrics.update(cross_class(frame, spec, metrics["groups"], trained, log))
    (sweep_dir / "models").mkdir(parents=True, exist_ok=True)
    tmp = sweep_dir / "models" / ".metrics.json.tmp"
    tmp.write_text(json.dumps(_finite(metrics), indent=1))
    tmp.replace(sweep_dir / "models" / "metrics.json")
    return {"metrics": metrics, "models": trained}


def _finite(obj: Any) -> Any:
    """JSON has no NaN: a score that is undefined (a constant prediction's rank correlation) becomes null."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj
