"""Bayesian optimisation: a Gaussian process on log time and expected improvement over the candidate pool.

A finite pool (every recorded or valid configuration) replaces a continuous acquisition optimiser: launch
parameters are discrete, and scoring all candidates is exact and cheap at these sizes. A scikit-learn GP keeps
the dependency list short (Optuna's TPE would propose configurations outside the recorded pool). The kernel's
hyperparameters are re-optimised only when the number of measurements has grown by half since the last time;
in between the GP is refitted with them fixed, which keeps a 200-measurement run to seconds.

Batching (a live search over several workers): the candidates of highest expected improvement, in order;
a proposal still in flight is left out of the candidates rather than imputed (no constant liar).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import minimize
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning

from .base import Session
from .estimators import gaussian_process, log_features

CLIP = 3.0


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    std = np.maximum(std, 1e-9)
    z = (best - mean) / std
    return (best - mean) * norm.cdf(z) + std * norm.pdf(z)


def _short_lbfgs(obj_func, initial_theta, bounds):
    # scikit-learn's default runs L-BFGS to convergence; 40 iterations get the length scales close enough
    # for ranking candidates at a fraction of the cost.
    res = minimize(
        obj_func, initial_theta, method="L-BFGS-B", jac=True, bounds=bounds, options={"maxiter": 40}
    )
    return res.x, res.fun


def tune(session: Session, initial: int = 10, max_refits: int = 15) -> None:
    session.measure_random(max(2, min(initial, session.budget // 2)))
    features = log_features(session.X)
    batch = max(1, -(-session.remaining // max_refits))  # refit at most max_refits times
    kernel, tuned_at = None, 0
    while session.remaining:
        _, y = session.training_data(clip=CLIP)
        idx = list(session.measured)
        model = gaussian_process(features.shape[1], session.seed)
        gp = model.steps[-1][1]
        if kernel is not None and len(idx) < 1.5 * tuned_at:
            gp.set_params(kernel=kernel, optimizer=None)
        else:
            gp.set_params(optimizer=_short_lbfgs)
            tuned_at = len(idx)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(features[idx], y)
        kernel = gp.kernel_
        mean, std = model.predict(features, return_std=True)
        ei = expected_improvement(mean, std, float(y.min()))
        session.measure_ranked(-ei, min(batch, session.remaining))
