"""Model-guided neighbourhood search: a forest ranks the whole pool, and every round part of the measurements
go to the neighbourhood of the best configurations measured so far.

What wins on the Hub's convolution data at 200 measurements is a genetic algorithm whose moves stay inside the
valid space (Kernel Tuner's, constraint-aware); what wins at 20-50 is a model that ranks every candidate.
This strategy does both: the neighbours of a configuration are the *recorded* (valid) configurations that
differ from it in one parameter (so every move respects the constraints), and a forest of randomised trees on
log time (the ``iterative`` model, with launch features that know warp and wavefront sizes) chooses which of
them to measure, and, with the rest of each round, which candidates anywhere in the pool.
"""

from __future__ import annotations

import numpy as np

from pipeline.strategies.base import Session
from pipeline.strategies.surrogates import forest, forest_mean_std, launch_features, product_features

CLIP = 3.0


def neighbours(X: np.ndarray) -> list[np.ndarray]:
    """For each candidate, the candidates that differ from it in exactly one parameter."""
    n, d = X.shape
    out: list[list[int]] = [[] for _ in range(n)]
    keys = [tuple(r) for r in X.astype(np.int64).tolist()]
    for j in range(d):
        groups: dict[tuple, list[int]] = {}
        for i, k in enumerate(keys):
            groups.setdefault(k[:j] + k[j + 1 :], []).append(i)
        for members in groups.values():
            if len(members) > 1:
                for i in members:
                    out[i].extend(m for m in members if m != i)
    return [np.array(sorted(o), dtype=int) for o in out]


def tune(
    session: Session,
    initial: int = 10,
    rounds: int = 20,
    top: int = 3,
    local_share: float = 0.5,
    kappa: float = 0.5,
    region_kind: str = "hamming",
    products: bool = False,
) -> None:
    budget = session.budget
    session.measure_random(max(2, min(initial, budget // 2)))
    features = (product_features if products else launch_features)(session.X)
    near = neighbours(session.X)
    batch = max(1, -(-session.remaining // rounds))
    r = 0
    while session.remaining:
        _, y = session.training_data(clip=CLIP)
        idx = np.array(list(session.measured))
        model = forest(session.seed + r, n_estimators=40).fit(features[idx], y)
        mean, std = forest_mean_std(model, features)
        n = min(batch, session.remaining)
        last = session.remaining <= batch
        score = mean - (0.0 if last else kappa) * std
        best = idx[np.argsort(y, kind="stable")[:top]]
        if region_kind == "box":  # every pool member whose values all occur among the best: crossovers
            inside = np.all([np.isin(session.X[:, j], session.X[best, j]) for j in range(session.X.shape[1])], axis=0)
            region = np.unique(np.concatenate([np.flatnonzero(inside), *[near[i] for i in best]]))
        else:
            region = np.unique(np.concatenate([near[i] for i in best])) if len(best) else np.empty(0, int)
        region = region[~np.isin(region, idx)]
        n_local = min(len(region), int(round(n * local_share)) if not last else n)
        if n_local:
            local = np.full(len(score), np.inf)
            local[region] = score[region]
            session.measure_ranked(local, n_local)
        if session.remaining and n - n_local > 0:
            session.measure_ranked(score, n - n_local)
        r += 1
