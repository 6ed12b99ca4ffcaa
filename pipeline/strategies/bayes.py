"""Bayesian optimisation: a Gaussian process on log time and expected improvement over the candidate pool.

A finite pool (every recorded or valid configuration) replaces a continuous acquisition optimiser: launch
parameters are discrete, and scoring all candidates is exact and cheap at these sizes. A scikit-learn GP keeps
the dependency list short (Optuna's TPE would propose configurations outside the recorded pool).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning

from pipeline.strategies.base import Session
from pipeline.strategies.surrogates import gaussian_process, log_features


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    std = np.maximum(std, 1e-9)
    z = (best - mean) / std
    return (best - mean) * norm.cdf(z) + std * norm.pdf(z)


def tune(session: Session, initial: int = 10, max_refits: int = 40) -> None:
    session.measure_random(max(2, min(initial, session.budget // 2)))
    features = log_features(session.X)
    batch = max(1, -(-session.remaining // max_refits))  # refit at most max_refits times
    while session.remaining:
        X, y = session.training_data()
        idx = list(session.measured)
        model = gaussian_process(features.shape[1], session.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(features[idx], y)
        mean, std = model.predict(features, return_std=True)
        ei = expected_improvement(mean, std, float(y.min()))
        session.measure_ranked(-ei, min(batch, session.remaining))
