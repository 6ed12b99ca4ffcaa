"""Random samples, then an additive model on log time picks the configurations worth re-measuring.

Where the dataset is separable (per-kernel times, each kernel launched by its own parameters: the CFD step),
one small additive model per kernel predicts that kernel's time from its own parameters and the step is their
sum; the best settings of every kernel are then composed into configurations, even ones never sampled.
Elsewhere one additive model (parameter effects plus pair effects) predicts the total.

Batching: the random phase is one batch (``Session.settle`` before the fit), the model's ranking another.
"""

from __future__ import annotations

import itertools

import numpy as np

from .base import Session
from .estimators import additive


def _per_kernel(session: Session) -> tuple[np.ndarray, list[dict[str, int]]] | None:
    """Per-kernel models on the measured kernel times: (predicted total per candidate, composed picks)."""
    rows = [m for m in session.history if np.isfinite(m.time) and m.kernels]
    if len(rows) < 3 or not all(k in rows[0].kernels for k in session.kernels):
        return None
    total = np.zeros(len(session.X))
    ranked_settings = []
    for kernel, names in session.kernels.items():
        cols = [session.names.index(n) for n in names]
        Xk = np.array([[m.config[n] for n in names] for m in rows], dtype=float)
        yk = np.log([max(m.kernels[kernel], 1e-12) for m in rows])
        model = additive(len(names)).fit(Xk, yk)
        total += np.exp(model.predict(session.X[:, cols]))
        grid = np.array(list(itertools.product(*(session.space[n].values for n in names))), dtype=float)
        ranked_settings.append((names, grid[np.argsort(model.predict(grid))]))
    composed = []
    for rank in range(3):  # the best, second and third setting of every kernel together
        config: dict[str, int] = {}
        for names, grid in ranked_settings:
            config.update(zip(names, (int(v) for v in grid[min(rank, len(grid) - 1)]), strict=True))
        composed.append(config)
    return total, composed


def tune(session: Session) -> None:
    verify = max(1, session.budget // 10)
    session.measure_random(session.budget - verify)
    session.settle()  # the random phase is one batch: the model learns from all of it
    if session.kernels:
        fitted = _per_kernel(session)
        if fitted is not None:
            scores, composed = fitted
            seen = [m.config for m in session.history]
            for config in composed:
                if session.remaining and session.can_measure(config) and config not in seen:
                    session.measure(config)
                    seen.append(config)
            session.measure_ranked(scores, session.remaining)
    X, y = session.training_data()
    if session.remaining and len(y) >= 2:
        model = additive(X.shape[1]).fit(X, y)
        session.measure_ranked(model.predict(session.X), session.remaining)
    session.measure_random(session.remaining)
