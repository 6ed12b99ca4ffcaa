"""The design of a fit: which features a group uses, how rows are split, and which models are made.

Shared by training (:mod:`pipeline.learn.train`), the cross-class scores (:mod:`pipeline.learn.crossclass`)
and the notebooks' refits (:mod:`pipeline.results.learning`), so the three agree on every split and feature.
Device facts as features come from the GPU-class registry: those every row carries
(:data:`kernels.device.DEVICE_FEATURES`, written by the worker that measured it) and those read from the
registry by class (:data:`launchtune.kernels.device.CLASS_FEATURES`: FP32 peak, last-level cache, vendor).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from launchtune.kernels.device import CLASS_FEATURES, DEVICE_FEATURES, SPEC_SHEET_FEATURES, class_features

from ..store.schema import cost_column
from ..store.spec import SweepSpec
from .models import make_gbr, make_mlp, with_inactive_zeroed

# A spec-sheet feature (kernels.device.SPEC_SHEET_FEATURES) is null where a class has no sheet (the CPU); it
# reads 0, a level of its own. Anything else null means "not measured" (rows older than the column): 0 would
# claim a value, so such a feature is left out of the combined fit and the reason recorded in metrics.json.
MIN_ROWS = 8


def training_rows(
    frame: pd.DataFrame, max_rows: int | None, seed: int
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The measured (ok) rows training sees: all of them, or a seeded draw of ``max_rows`` per class.

    An MLP's fit costs rows x epochs and the merged frame's copies cost memory: at 10^5 rows a class the
    surrogate no longer gains what its fit costs on the login node (issue 18's rehearsal), so a class with
    more rows is trained on a uniform sample of them. Returns the rows and, per class, how many were merged
    and how many used, for ``metrics.json`` (the row count is always stated)."""
    ok = frame[(frame["status"] == "ok") & frame[cost_column(list(frame.columns))].notna()]
    rng = np.random.default_rng(seed)
    parts, counts = [], {}
    for cls, rows in ok.groupby("gpu_class", sort=True):
        used = rows
        if max_rows is not None and len(rows) > max_rows:
            used = rows.iloc[np.sort(rng.choice(len(rows), size=max_rows, replace=False))]
        parts.append(used)
        counts[str(cls)] = {"ok_rows": int(len(rows)), "used": int(len(used))}
    out = pd.concat(parts) if parts else ok
    return out.reset_index(drop=True), {"max_rows": max_rows, "per_class": counts}


def capped(rows: pd.DataFrame, positions: np.ndarray, max_rows: int | None, seed: int) -> np.ndarray:
    """``positions`` (row positions in ``rows``) with at most ``max_rows`` of each class, in their order.

    A class over the cap keeps a seeded uniform draw of its positions. The draw of a class depends only on the
    seed and that class's own positions. Used for the leave-one-class-out MLP fits (``train.loco_rows``),
    whose cost is rows x epochs and whose scores vary more with the seed than with this cap (the measurement
    is in ``data/cfd/combined/sweep_paper/PROVENANCE.md``)."""
    positions = np.asarray(positions)
    if max_rows is None:
        return positions
    classes = rows["gpu_class"].to_numpy()[positions]
    keep = np.ones(len(positions), bool)
    for cls in np.unique(classes):
        where = np.flatnonzero(classes == cls)
        if len(where) > max_rows:
            drawn = np.random.default_rng(seed).choice(len(where), size=max_rows, replace=False)
            keep[np.delete(where, drawn)] = False
    return positions[keep]


def split(frame: pd.DataFrame, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row positions of the train and test sets; the same call in the report gives the same split."""
    return train_test_split(np.arange(len(frame)), test_size=test_fraction, random_state=seed)


def features_for(plan: Mapping[str, Any], combined: bool) -> list[str]:
    """Every feature a group may use; ``device_features`` says which of the device facts the data has."""
    return list(plan["params"]) + (list(DEVICE_FEATURES) + list(CLASS_FEATURES) if combined else [])


def with_class_facts(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with the registry's ``CLASS_FEATURES`` of each row's class (null where the registry lacks a
    figure) in columns the rows do not have already; ``rows`` itself where they have all."""
    missing = [f for f in CLASS_FEATURES if f not in rows]
    if not missing:
        return rows
    facts = {c: class_features(c) for c in rows["gpu_class"].unique()}
    out = rows.copy()
    for f in missing:
        out[f] = rows["gpu_class"].map({c: facts[c][f] for c in facts}).astype(float)
    return out


def device_features(rows: pd.DataFrame) -> tuple[list[str], dict[str, str]]:
    """The device facts usable on ``rows`` and, for each left out, why."""
    used, dropped = [], {}
    for f in DEVICE_FEATURES + CLASS_FEATURES:
        if f not in rows:
            dropped[f] = "not in the data (measured before the column existed)"
        elif f in CLASS_FEATURES and rows[f].isna().any():
            missing = sorted(rows.loc[rows[f].isna(), "gpu_class"].unique())
            dropped[f] = f"no figure in the GPU registry (kernels/device.py) for {', '.join(missing)}"
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


def model_makers(
    spec: SweepSpec,
    n_train: int,
    combined: bool,
    features: Sequence[str] = (),
    inactive: Sequence[Sequence[Any]] = (),
) -> dict[str, Any]:
    """The models a group fits. Combined ones learn log(time): classes may differ by orders of magnitude.
    Where the plan names parameters a configuration does not use (``inactive``, e.g. the fused CFD space),
    each model zeroes them first (``models.ZeroInactive``), for fitting and every prediction alike."""
    return {
        "mlp": lambda: with_inactive_zeroed(
            make_mlp(
                spec.train.hidden_layers, spec.train.max_epochs, spec.seed, n_train, log_target=combined
            ),
            features,
            inactive,
        ),
        "gbr": lambda: with_inactive_zeroed(make_gbr(spec.seed, log_target=combined), features, inactive),
    }


def design(rows: pd.DataFrame, features: list[str]) -> np.ndarray:
    if any(f not in rows for f in features):
        rows = with_class_facts(rows)
    return rows[features].astype(float).fillna(0.0).to_numpy()
