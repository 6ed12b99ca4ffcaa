"""Iterative (active) search after IterML: sample a little, learn, measure where the model is promising or
unsure, learn again.

The model is a forest of randomised trees on log time (capped at ``CLIP`` times the best seen, so it spends
itself on ranking the good region), over ``product_features``: launch features that know about warp and
wavefront sizes, plus the products of sizes (threads per block, cells per tile), with the parameters a
configuration does not use zeroed (``Session.unused``: the fused CFD levels ignore the seven kernels'
launches). Each tree learns from its own bootstrap resample of the measurements. Each round measures a batch
by Thompson sampling over the trees: every slot takes one tree, drawn without replacement, and measures that
tree's best unmeasured candidate. Where trees disagree (a branch of the space seen only through a few poor
samples, such as the fused stage kernel's narrow fast corner) some tree ranks it first, so it gets measured;
where they agree, the batch exploits. The last tenth of the budget (``EXPLOIT``) measures the forest's mean
best only.

Why (issue 16; the replayed fused CFD sweeps, seeds 0-9 and 100-109, budget 100; mean picked/optimum on the
H100 / H200): the lower-confidence-bound batches this replaced (``mean - 1.0 * spread``, clip 3, 10 rounds)
scored 1.138 / 1.044, most H100 runs ending on the directional level's best (1.159); zeroing the unused
parameters gave 1.083 / 1.036; Thompson batches over product features 1.033 / 1.022; with bootstrap trees
1.000 / 1.021. On the flat seven-kernel sweeps (5 seeds, both cards) exploiting only in the last round
scored 1.054 / 1.018 at 50 / 100 measurements (the replaced version: 1.039 / 1.003); a last tenth of
exploitation gives 1.021 / 1.016, and 1.054 / 1.008 on the fused sweeps (a last fifth: 1.024 / 1.010 and
1.067 / 1.008). With it, the fused sweeps' 20 seeds at 100 measurements: 1.008 / 1.014.

A tree's best is rarely one candidate: its leaf holding the best measurement also holds hundreds of unmeasured
ones (min_samples_leaf=1 trees over a few dozen measurements), and ``np.argmin`` took the first of them in
the dataset's row order, so the search leaned on where the recorded rows happened to sit. On the H100 sweep
with ``tile.arith`` of c8fffdd's kernels (data/cfd/h100/sweep_fused_arith at commit ace1b6f; the same seeds
and budget) seven of ten runs ended on its earliest fast row (row 192,
1.083x the best); shuffling the rows moved the score from 1.086 to 1.054-1.085, and the older H100 sweep's
1.016 to 1.093-1.163 (its best rows sit at rows 38, 367 and 683). Ties are now broken by the forest's mean:
the drawn tree picks the region, the forest the candidate in it. That sweep: 1.026 (seeds 100-109: 1.010;
three shuffled orders: 1.010-1.017); the older H100 / H200 sweeps: 1.080 / 1.029 in their own order, 1.120 /
1.033 shuffled (the same three orders), where the old tie-break scores 1.117 / 1.040 shuffled. (A threads x
register-cap feature, the cap 0 read as 255, did not move the new sweep: 1.087.)

With the stage kernel's HLLC on reciprocal square roots (the sweeps of cb10d31, one row within 3% of the best)
the tie-break alone scored 1.064 on the H100 (seeds 0-9): one run measured the directional level's
equivalent candidates over and over (configurations that differ only in the seven kernels' launches, which
that level does not use, are different rows of the sweep). ``Session.unmeasured`` now leaves out every
candidate of a measured group (``Session._group``): 1.023 (seeds 100-109: 1.013); without the tie-break the
groups alone leave it at 1.111. The cost, on the Benchmark Hub's convolution (6 GPUs, 20 seeds): 2.387 /
1.337 / 1.132 / 1.035 at 20 / 50 / 100 / 200 against 1.733 / 1.238 / 1.120 / 1.059 with the row-order
tie-break; the forest's mean sends a small budget's ties to one region (the MI250X at 20: 5.4).

Levels (a space whose parameters are used or not by level, ``Session.levels``: the fused CFD space's
``fusion``): a level whose typical configuration is slow can hold the fastest one (the stage-fused level's
median is 2.4x its best, the directional level's 1.5x), and once the trees agree on the other level's best the
Thompson draws stop visiting it. A level stays *live* while its best measurement is within ``LIVE`` (1.2x) of
the best of all; while more than one is live, each Thompson slot in turn takes the next live level and the
drawn tree's best inside it. Replayed on the fused sweeps at 100 measurements, seeds 0-39, mean picked/optimum
on the H100 / H200: 1.034 / 1.142 before, 1.032 / 1.072 with it (the H200's runs that stayed on the
directional level's best, 1.280, are gone); at 50: 1.107 / 1.191 before, 1.106 / 1.171; at 200: 1.000 / 1.014
before, 1.000 / 1.004 (seeds 0-19). Spaces without levels search as before.

Batching (a live search over several workers, ``Session``): a round's Thompson batch is the batch, one tree
per slot; the next round's forest learns from whatever answers are back, and candidates in flight are left
out. Replayed with 4 in flight: no measurable cost; with 8, none on the convolution and 4% [0.3, 8.6] on the
fused CFD sweep (``docs/strategies.md``).
"""

from __future__ import annotations

import numpy as np

from .base import Session
from .estimators import forest, forest_predictions, product_features

CLIP = 1.3
LIVE = 1.2  # a level whose best measurement is within this of the best of all is still searched
# ``live_levels``' floor: a level measured too little to judge stays searched while its best is within this
FLOOR_WITHIN = 2.0
ROUNDS = 20
TREES = 60
EXPLOIT = 0.1  # the last tenth of the budget measures the forest's mean best, one batch a round


def tune(session: Session, initial_fraction: float = 0.2, rounds: int = ROUNDS) -> None:
    budget = session.budget
    session.measure_random(max(2, min(budget, round(initial_fraction * budget))))
    features = product_features(session.X, session.unused)
    exploit_from = budget - round(EXPLOIT * budget)
    batch = max(1, (exploit_from - session.used) // rounds)
    r = turn = 0
    while session.remaining:
        _, y = session.training_data(clip=CLIP)
        idx = list(session.measured)
        model = forest(session.seed + r, n_estimators=TREES, bootstrap=True).fit(features[idx], y)
        per_tree = forest_predictions(model, features)
        n = min(batch, session.remaining)
        if session.used >= exploit_from or session.remaining <= batch:
            session.measure_ranked(per_tree.mean(axis=0), n)
        else:
            turn = measure_thompson(session, per_tree, n, np.random.default_rng([session.seed, r]), turn)
        r += 1


def live_levels(session: Session, pool: np.ndarray, floor: float = 0.0) -> list[int]:
    """The levels still searched: those with unmeasured candidates whose best measurement is within ``LIVE``
    of the best of all (empty without levels or measurements). ``floor``: also a level with fewer than
    ``floor`` times its fair share of the measurements (their count over the levels measured) whose best is
    within ``FLOOR_WITHIN``: a level's best over a few measurements says little of its best configuration."""
    if session.levels is None:
        return []
    best: dict[int, float] = {}
    count: dict[int, int] = {}
    for i, t in session.measured.items():
        level = int(session.levels[i])
        best[level] = min(best.get(level, np.inf), t)
        count[level] = count.get(level, 0) + 1
    top = min(best.values(), default=np.inf)
    if not np.isfinite(top):
        return []
    open_levels = set(session.levels[pool].tolist())
    few = floor * len(session.measured) / len(best)
    return sorted(
        level
        for level, b in best.items()
        if level in open_levels and (b <= LIVE * top or (count[level] < few and b <= FLOOR_WITHIN * top))
    )


def measure_thompson(
    session: Session,
    per_tree: np.ndarray,
    n: int,
    rng: np.random.Generator,
    turn: int = 0,
    floor: float = 0.0,
) -> int:
    """Measure ``n`` distinct unmeasured candidates, each the best of one tree drawn without replacement;
    among the candidates that tie for a tree's best (its leaf), the forest's mean decides, not row order.
    With more than one live level (:func:`live_levels`) slot ``turn + k`` looks only inside the live level
    ``(turn + k) % count`` (``floor``: :func:`live_levels`'). Returns the next turn."""
    pool = session.unmeasured()
    mean = per_tree.mean(axis=0)[pool]
    live = live_levels(session, pool, floor)
    pool_levels = session.levels[pool] if session.levels is not None else None
    chosen: list[int] = []
    for t in rng.choice(len(per_tree), size=min(n, len(per_tree), len(pool)), replace=False):
        scores = per_tree[t][pool].copy()
        scores[np.isin(pool, chosen)] = np.inf
        if pool_levels is not None and len(live) > 1:
            inside = np.where(pool_levels == live[turn % len(live)], scores, np.inf)
            scores = inside if np.isfinite(inside).any() else scores  # a level this batch has used up
            turn += 1
        chosen.append(int(pool[np.lexsort((mean, scores))[0]]))
    for i in chosen:
        session.measure_index(i)
    return turn
