"""Iterative (active) search after IterML: sample a little, learn, measure where the model is promising or
unsure, learn again.

The model is a forest of randomised trees on log time; each round measures the candidates with the lowest
``mean - kappa * spread`` (the spread across trees is the uncertainty), and the last round exploits only.
"""

from __future__ import annotations

from pipeline.strategies.base import Session
from pipeline.strategies.surrogates import forest, forest_mean_std

KAPPA = 1.0


def tune(session: Session, initial_fraction: float = 0.2, rounds: int = 10) -> None:
    budget = session.budget
    session.measure_random(max(2, min(budget, round(initial_fraction * budget))))
    batch = max(1, (budget - session.used) // rounds)
    r = 0
    while session.remaining:
        X, y = session.training_data()
        model = forest(session.seed + r).fit(X, y)
        mean, std = forest_mean_std(model, session.X)
        last = session.remaining <= batch
        session.measure_ranked(mean - (0.0 if last else KAPPA) * std, min(batch, session.remaining))
        r += 1
