"""Transfer from other GPUs: a combined model over their recorded data, with device facts as features (the
seed's combined training, Fig. 14), ranks the new GPU's candidates before it has measured anything; a few
measurements on the new GPU then correct that ranking.

Leave-one-GPU-out is this strategy run on one device's dataset with the other devices as ``session.prior``.
Measure the prior's best configurations, then search with ``evolve`` (a genetic algorithm whose children a
forest on the new GPU's own measurements ranks), starting from them.

Batching (a live search over several workers): the prior's best are one batch, then ``evolve``'s
generations.
"""

from __future__ import annotations

import numpy as np

from ..store.datasets import HUB_DEVICE_FEATURES
from .base import Session, StrategyError
from .estimators import forest, launch_features, product_features

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


def target_vector(session: Session) -> np.ndarray:
    """The new GPU's facts: its recorded dataset's (replay) or, live, the spec-sheet figures of the card the
    sweep runs on (``session.device["features"]``, from ``strategies.datasets.EXTRA_DEVICE_FACTS``)."""
    target = session.device.get("dataset")
    if target is not None:
        return _device_vector(target)
    facts = session.device.get("features")
    if not facts:
        name = session.device.get("device_name", "this device")
        raise StrategyError(f"transfer needs the target device's facts, and none are known for {name}")
    return np.log(np.array([float(facts[k]) for k in HUB_DEVICE_FEATURES]) + 1.0)


def prior_scores(session: Session, target_device: np.ndarray) -> np.ndarray:
    if not session.prior:
        raise StrategyError("transfer needs recorded data of other GPUs (--dataset: a directory of several)")
    model = combined_model(session.prior, session.names)
    X = np.hstack([launch_features(session.X), np.tile(target_device, (len(session.X), 1))])
    return model.predict(X)


def tune(session: Session, trust: int = 20, share: float = 0.25) -> None:
    """Measure the combined model's best ``max(min(trust, budget), share * budget)`` first (with 20 or fewer
    measurements the new GPU's own data is too thin to correct the ranking: measured, correcting after 10 made
    picks worse), then search on the new GPU with ``evolve``'s surrogate-assisted genetic algorithm, from
    those measurements and on the new GPU's measurements alone.

    Why the search's forest no longer takes the prior's prediction as a feature (issue 17): the prior has
    chosen where to start, and as a feature it kept ranking by the other GPUs where the new one departs from
    them. On the A100, whose optimum no other GPU shares (an isolated configuration, every one-parameter
    neighbour 1.2x slower or worse), transfer stayed at 1.12-1.13 up to 100 measurements and 1.05-1.07 at 200;
    without the feature and with ``evolve``'s options (whole-pool share, Thompson sampling, flag flips) it
    reached 1.034 at 200 over 20 seeds (1.055 before), the other five GPUs unchanged."""
    from .evolve import OPTIONS, search

    prior = prior_scores(session, target_vector(session))
    session.measure_ranked(prior, max(min(trust, session.budget), round(share * session.budget)))
    if session.remaining:
        search(session, product_features(session.X, session.unused), **OPTIONS)  # as evolve
