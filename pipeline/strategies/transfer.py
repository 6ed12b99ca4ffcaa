"""Transfer from other GPUs: a combined model over their recorded data, with device facts as features (the
seed's combined training, Fig. 14), ranks the new GPU's candidates before it has measured anything; a few
measurements on the new GPU then correct that ranking.

Leave-one-GPU-out is this strategy run on one device's dataset with the other devices as ``session.prior``.
Measure the prior's best configurations, then search with ``evolve`` (a genetic algorithm whose children a
forest on the new GPU's own measurements ranks, with the combined model's prediction as an extra feature, so
it learns where the new GPU departs from the others).
"""

from __future__ import annotations

import numpy as np

from pipeline.strategies.base import Session, StrategyError
from pipeline.strategies.estimators import forest, launch_features, product_features

_CACHE: dict[tuple, object] = {}
CLIP = 3.0  # the combined model learns log(t / best) capped at 3x: only the good region needs ranking


def _device_vector(dataset) -> np.ndarray:
    v = dataset.device_vector()
    if v is None:
        raise StrategyError(f"{dataset.name}: no device facts known, so it cannot join combined training")
    return np.log(v + 1.0)  # spec figures span orders of magnitude; the vendor flag stays 0 / log 2


def combined_model(prior: list, names: list[str]):
    """One forest over every prior device's recorded configurations: params + device facts -> log(t/best)."""
    key = (tuple(d.source or d.name for d in prior), tuple(names))
    if key in _CACHE:
        return _CACHE[key]
    X, y = [], []
    for d in prior:
        ok = d.ok
        dev = _device_vector(d)
        feats = launch_features(ok[names].to_numpy(dtype=float))
        X.append(np.hstack([feats, np.tile(dev, (len(ok), 1))]))
        y.append(np.minimum(np.log(ok["time"].to_numpy() / ok["time"].min()), np.log(CLIP)))
    model = forest(0, n_estimators=60).fit(np.vstack(X), np.concatenate(y))
    _CACHE[key] = model
    return model


def prior_scores(session: Session, target_device: np.ndarray) -> np.ndarray:
    if not session.prior:
        raise StrategyError("transfer needs recorded data of other GPUs (--dataset: a directory of several)")
    model = combined_model(session.prior, session.names)
    X = np.hstack([launch_features(session.X), np.tile(target_device, (len(session.X), 1))])
    return model.predict(X)


def tune(session: Session, trust: int = 20, share: float = 0.25) -> None:
    """Measure the combined model's best ``max(min(trust, budget), share * budget)`` first (with 20 or fewer
    measurements the new GPU's own data is too thin to correct the ranking: measured, correcting after 10 made
    picks worse), then search on the new GPU with ``evolve``'s surrogate-assisted genetic algorithm, whose
    forest takes the prior's prediction as one more feature: the further the budget, the more the new GPU's
    own measurements decide (issue 17: the A100, whose optimum no other GPU shares, stayed at 1.12-1.13 at
    every budget when the rest of the budget only re-ranked around the prior)."""
    from pipeline.strategies.evolve import search

    target = session.device.get("dataset")
    if target is None:
        raise StrategyError("transfer needs the target device's facts (run it on a recorded dataset)")
    prior = prior_scores(session, _device_vector(target))
    session.measure_ranked(prior, max(min(trust, session.budget), round(share * session.budget)))
    if session.remaining:
        search(session, np.column_stack([product_features(session.X), prior]))
