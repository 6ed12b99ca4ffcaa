"""Iterative (active) search after IterML: sample a little, learn, measure where the model is promising or
unsure, learn again.

The model is a forest of randomised trees on log time (capped at ``CLIP`` times the best seen, so it spends
itself on ranking the good region), over launch features that know about warp and wavefront sizes. Each round
measures the candidates with the lowest ``mean - KAPPA * spread`` (the spread across trees is the
uncertainty); the last round exploits only.
"""

from __future__ import annotations

from pipeline.strategies.base import Session
from pipeline.strategies.estimators import forest, forest_mean_std, launch_features

KAPPA = 1.0
CLIP = 3.0


def tune(session: Session, initial_fraction: float = 0.2, rounds: int = 10) -> None:
    budget = session.budget
    session.measure_random(max(2, min(budget, round(initial_fraction * budget))))
    features = launch_features(session.X)
    batch = max(1, (budget - session.used) // rounds)
    r = 0
    while session.remaining:
        _, y = session.training_data(clip=CLIP)
        idx = list(session.measured)
        model = forest(session.seed + r, n_estimators=60).fit(features[idx], y)
        mean, std = forest_mean_std(model, features)
        last = session.remaining <= batch
        session.measure_ranked(mean - (0.0 if last else KAPPA) * std, min(batch, session.remaining))
        r += 1
