"""Surrogate-assisted genetic algorithm: crossover and mutation of the best configurations measured so far
propose many children inside the valid space, and a forest on log time chooses which few to measure.

Why: on the Hub's convolution data a genetic algorithm whose moves stay inside the valid space (Kernel
Tuner's, constraint-aware) wins at 200 measurements, and a model that ranks candidates wins at 20-50.
Here the algorithm proposes and the model disposes. Every choice below was measured on that data (6 GPUs, 4-6
seeds per variant, issue 17; the variants tried and what each gave: ``docs/strategies.md``):

* the first quarter of the budget (at least 8) is a maximin design over the features (each next point the
  farthest from those chosen), so the first measurements cover both sides of every step a feature shows;
* the features are ``product_features``: launch features plus log2 and power-of-two divisor of the products of
  block and tile sizes (threads per block, work per thread), with the parameters a configuration does not use
  zeroed (``Session.unused``, as ``iterative`` does: the fused CFD levels ignore the seven kernels' launches,
  and the maximin design and the trees spent themselves on those meaningless differences; replayed on the
  fused CFD sweeps at 100 measurements, seeds 0-39, H100 / H200: 1.145 / 1.201 before, 1.058 / 1.163 with
  them zeroed; at 200, seeds 0-9: 1.031 / 1.117 before, 1.041 / 1.007);
* each of ``GENERATIONS`` generations breeds ``CANDIDATES_PER_SLOT`` children per measurement it will spend
  (uniform crossover of two parents picked by rank, a mutation of one parameter in 30%), each child *repaired*
  to the nearest recorded (valid) configuration (fewest parameters changed, ties at random), and measures the
  children with the lowest ``mean - KAPPA * spread`` across trees (the last generation: lowest mean);
* two islands: each measured configuration belongs to one, and parents pair within an island, so one
  population that converges into a trap (the A6000's and W6600's shared-memory plateaus at 1.2-1.3x) does not
  take the other with it; the model is shared;
* after ``PATIENCE`` generations without a better measurement, half of the next generation goes to the model's
  best candidates at least 3 parameters away from the incumbent;
* the last ``POLISH`` of the budget measures the two incumbents' one-parameter neighbours, best-ranked first;
* ``evolve`` itself (and ``transfer`` after its prior's best: ``OPTIONS``) adds three things against
  populations that settle in a trap (issue 17, ``docs/strategies.md`` "How evolve was improved"):

  - a quarter of every generation (``EXPLORE``, rounded: none in a generation of 1 or 2) goes to the lowest
    ``mean - 2 * KAPPA * spread`` over *all* unmeasured candidates, not only children, so the model can
    propose what crossover of the current parents never would (on the W6600 a run spent 100 of 200
    measurements on a plateau of shared-memory configurations within 2% of each other, 1.2x the optimum);
  - where an island has two or more slots, its children are chosen by Thompson sampling (each slot the best
    child by one tree drawn at random) instead of one ``mean - KAPPA * spread`` ranking, whose top slots are
    near-copies of one parent pair (with one slot there is no batch to spread, so ranking stays);
  - each polish generation of ``n`` slots first measures up to ``FLIPS * n`` configurations that flip one
    two-valued parameter of the best measured ones, in rank order, then its ``n`` one-parameter neighbours as
    before (so flips take up to a third of the polish, which still ends the budget): a flag such as
    ``use_shmem`` switches the kernel's code path, so its effect is the one a model trained on the other
    setting cannot predict, and it costs one measurement per flag (on the A6000 the search sat at 1.29x with
    (64, 1, 2, 4, 0, 0, 1) measured at 1.34x; its ``use_shmem=0`` neighbour is 1.06x and was never tried);

* against a bad worst seed (issue 45: one user runs one search; ``WORST_CASE``, ``tune`` only; measured
  with ``benchmarks/search_worst_seed.py``, the variants tried and what each gave: ``docs/strategies.md``):

  - a reserved share: a fifth of the budget beyond ``RESERVE_FROM`` measurements, at most ``RESERVE_CAP``
    (none at 100 or less, where it scored worse on the H100 convolution), measured just before the polish:
    the unmeasured candidates most likely ``MARGIN`` faster than the best measured, by the forest's mean and
    spread and the search's own forecast errors (:func:`_chance_each`); on the H100 convolution at 200 it
    takes the runs that ended in the 1.29x basin of ``tile_size_x = 2`` to the optimum's region;
  - level turns (``levels``, ``level_explore``, ``level_thompson``; they act only on a space with levels,
    the fused CFD space, while more than one level is in reach, and at a budget of ``TURNS_FROM`` or more):
    the whole-pool share is half of each generation instead of a quarter, chosen as ``iterative``'s Thompson
    batch whose slots take turns between those levels, and the stuck share takes turns too. With the
    reserve, replayed on the fused CFD sweeps (seeds 0-19), mean / worst seed went from 1.064 / 1.317 to
    1.048 / 1.139 (H100, 100 measurements), 1.023 / 1.328 to 1.004 / 1.087 (H100, 200), 1.180 / 1.298 to
    1.147 / 1.280 (H200, 100) and 1.034 / 1.280 to 1.028 / 1.280 (H200, 200); each mean's 95% interval
    holds no change, all four moved the same way (first judged worse on the 14 seeds of the old search then
    run). At 50 they made both means worse (H100 1.195 against 1.177, H200 1.290 against 1.233), hence
    none under 100;
  - the level turns' floor (``level_floor``, ``LEVEL_FLOOR``; third round): a level with fewer than half its
    fair share of the measurements stays in the turns while its best is within ``iterative.FLOOR_WITHIN``
    (2x) of the best of all, since a level's best over a few measurements says little of its best
    configuration (live on one H100, a seed had settled on ``fusion: 1``, 1.48x, with no measurement near the
    fast basin). Replayed over 40 seeds, the fused CFD means went from 1.058 / 1.011 to 1.059 / 1.005 (H100,
    100 / 200) and 1.137 / 1.026 to 1.095 / 1.021 (H200), the H200's worst seed at 200 from 1.280 to 1.155;
    variants of its share and reach scored alike, and a screen of the other knobs (islands, explore share,
    reserve, initial design, patience, generations, clip, kappa, a polish around several incumbents) traded
    fewer misses at 200 for more at 100 (docs/strategies.md);
  - ``session.notes["p_faster"]`` (:func:`sureness`): the search's estimate of the chance that a
    configuration ``MARGIN`` faster than its pick remains unmeasured, in the JSON line and the live report;

* the model learns log time capped at ``CLIP`` times the best seen (100x slow tells no more than 10x).

Batching (a live search over several workers, ``Session``): a generation is the batch; its children are
proposed by Thompson sampling over the trees, so a wide batch spreads instead of repeating one parent pair,
and the next generation's forest learns from whatever answers are back (proposals still in flight are never
bred or offered again). Replayed with 4 and 8 in flight: no measurable cost on the convolution or the fused
CFD sweep (``docs/strategies.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Session
from .estimators import fitted_trees, forest_predictions, product_features
from .iterative import live_levels, measure_thompson

CLIP = 10.0
KAPPA = 0.5
CANDIDATES_PER_SLOT = 16
GENERATIONS = 20
PATIENCE = 2
POLISH = 0.15
ISLANDS = 2
EXPLORE = 0.25
FLIPS = 0.5
# trees in each generation's forest (and ``sureness``'s): 20, not 40, halves the forest's host time, over
# half of the search's (issue 53); replayed on the fused CFD sweeps at 400, seeds 0-39, the worst seed stayed
# 1.000 on the H100 and the H200 (benchmarks/search_worst_seed.py, variant ``trees20``)
TREES = 20
# the share of the features each split of those trees draws from: half of the fused CFD space's ~379 grows
# them in about half the time (a split's cost is linear in them); replayed on the fused CFD sweeps at 400,
# seeds 0-39, the worst seed stayed 1.000 on the H100 and the H200, where sqrt(features) left 19 of 40 H200
# seeds over 5% off (benchmarks/search_worst_seed.py, variants ``half_features`` and ``sqrt``; issue 53)
MAX_FEATURES: float | str = 0.5
MARGIN = 1.05  # ``p_faster``: the chance that a configuration this much faster than the pick is unmeasured
# what ``tune`` (and ``transfer`` after its prior's best) adds to ``search``: see the module's docstring
OPTIONS: dict[str, Any] = {"explore": EXPLORE, "thompson": True, "flips": FLIPS}
# what ``tune`` adds against a bad worst seed (issue 45; the module's docstring, docs/strategies.md)
RESERVE = 0.2  # of the budget beyond RESERVE_FROM, at most RESERVE_CAP measurements
RESERVE_CAP = 20
RESERVE_FROM = 100
TURNS_FROM = 100  # the level turns only at a budget of this many measurements or more
# a level with fewer than half its share of the measurements takes turns while within 2x of the best
LEVEL_FLOOR = 0.5
WORST_CASE: dict[str, Any] = {
    "reserve": RESERVE,
    "reserve_cap": RESERVE_CAP,
    "reserve_from": RESERVE_FROM,
    "reserve_z": True,
    "levels": True,
    "level_explore": 0.5,
    "level_thompson": True,
    "levels_from": TURNS_FROM,
    "level_floor": LEVEL_FLOOR,
}


class _Breeder:
    """Crossover, mutation and repair over a finite pool of valid configurations ``X`` (rows), a batch of
    children at a time: per child in Python, breeding and repairing was a third of an ``evolve`` search's
    host time (issue 53: 12,000-17,000 children a search at 200 measurements, none valid as bred)."""

    # children repaired at once: their distances to every configuration, one byte each, stay under 4 MB
    CHUNK_BYTES = 4 << 20

    def __init__(self, X: np.ndarray, rng: np.random.Generator, mutation: float = 0.3) -> None:
        self.rng = rng
        self.mutation = mutation
        # Each column's values as their position among its distinct values (uint8 where they fit), one row
        # per parameter: breeding and repair work on these codes, and the Hamming distance of a batch of
        # children to every configuration is one byte compare per parameter, summed as bytes.
        columns = [np.unique(X[:, j], return_inverse=True)[1] for j in range(X.shape[1])]
        codes = np.stack(columns) if columns else np.zeros((0, len(X)), np.int64)
        self._codes = codes.astype(np.uint8 if codes.max(initial=0) < 256 else np.int64)
        self._n_values = self._codes.max(axis=1).astype(np.int64) + 1 if len(X) else np.ones(0, np.int64)
        self._dist_dtype = np.uint8 if X.shape[1] < 256 else np.int32

    def children(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """One child of each pair of rows ``a[k]``, ``b[k]``: each parameter from either parent (uniform
        crossover), in ``mutation`` of the children one parameter redrawn from its values, then repaired to
        the nearest configuration (fewest parameters changed, ties at random). Returns their row numbers."""
        m, p = len(a), len(self._codes)
        take = self.rng.random((p, m)) < 0.5
        kids = np.where(take, self._codes[:, a], self._codes[:, b])
        mutate = np.flatnonzero(self.rng.random(m) < self.mutation)
        j = self.rng.integers(p, size=len(mutate))
        kids[j, mutate] = (self.rng.random(len(mutate)) * self._n_values[j]).astype(kids.dtype)
        step = max(1, self.CHUNK_BYTES // max(1, self._codes.shape[1]))
        return np.concatenate([self._repair(kids[:, k : k + step]) for k in range(0, m, step)] or [a[:0]])

    def _repair(self, kids: np.ndarray) -> np.ndarray:
        """The nearest configuration to each column of ``kids`` (codes), ties drawn at random."""
        dist = np.zeros((kids.shape[1], self._codes.shape[1]), self._dist_dtype)
        for row, kid in zip(self._codes, kids, strict=True):
            dist += row != kid[:, None]
        nearest = dist == dist.min(axis=1, keepdims=True)
        count = nearest.sum(axis=1)
        # each child's r-th nearest, r uniform below their count
        r = (self.rng.random(len(dist)) * count).astype(np.int64)
        picked = np.argmax(nearest, axis=1)  # the first nearest: the one where it is alone (9 in 10)
        tied = np.flatnonzero(count > 1)
        # where several are nearest, their positions: listing them for every child was half of the repair
        _, row = np.nonzero(nearest[tied])
        picked[tied] = row[np.cumsum(count[tied]) - count[tied] + r[tied]]
        return picked


def _parents(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """Rank-based selection: index 0 (the best) most likely (a Beta(1, 2.5) draw, as Kernel Tuner's GA)."""
    return np.minimum(n - 1, (rng.beta(1.0, 2.5, size) * n).astype(np.int64))


def maximin(session: Session, features: np.ndarray, n: int, pool: np.ndarray | None = None) -> None:
    """Measure ``n`` candidates spread over the feature space: a random first one, then each time the one
    farthest from all chosen (standardised features), so the first few measurements already cover both sides
    of every step a launch feature can show (a power of two or not, the smallest and largest sizes).
    ``pool``: only these candidates (default: every unmeasured one)."""
    # a column equal on every row adds 0 to every distance: without them (a third of the fused CFD space's
    # features) the same distances cost a third less
    varying = features[:, np.ptp(features, axis=0) > 0]
    z = (varying - varying.mean(axis=0)) / np.maximum(varying.std(axis=0), 1e-12)
    outside = None if pool is None else np.setdiff1d(np.arange(len(features)), pool)
    pool = session.unmeasured() if pool is None else pool
    first = int(session.rng.choice(pool))
    chosen = [first]
    dist = np.linalg.norm(z - z[first], axis=1)
    while len(chosen) < min(n, session.remaining, len(pool)):
        dist[chosen] = -1.0
        if outside is not None:
            dist[outside] = -1.0
        nxt = int(np.argmax(dist + 1e-9 * session.rng.random(len(dist))))
        chosen.append(nxt)
        dist = np.minimum(dist, np.linalg.norm(z - z[nxt], axis=1))
    session.announce(chosen)
    for i in chosen:
        session.measure_index(i)


def tune(
    session: Session,
    initial_fraction: float = 0.25,
    generations: int = GENERATIONS,
    islands: int = ISLANDS,
    cover_levels: bool = False,
    confirm: int = 0,
    **options,
) -> None:
    """Options against a live search's noise (issue 53; what each gave under the live noise of a replay:
    data/combined/search_worst_seed/noisy_replay/README.md). ``cover_levels``: on a space with levels (the
    fused CFD space's fusion levels), the initial design is split evenly between the levels, each part spread
    over its own level. ``confirm``: the last this many measurements re-measure the contenders
    (:func:`_confirm`) instead of searching, so the pick is not one lucky measurement."""
    session.budget -= min(confirm, session.budget - 1)
    n0 = max(2, min(session.budget, max(8, round(initial_fraction * session.budget))))
    features = product_features(session.X, session.unused)
    if cover_levels and session.levels is not None:
        pool = session.unmeasured()
        levels = np.unique(session.levels[pool])
        for k, level in enumerate(levels):
            share = n0 // len(levels) + (k < n0 % len(levels))
            maximin(session, features, share, pool[session.levels[pool] == level])
    else:
        maximin(session, features, n0)
    options = {**OPTIONS, **WORST_CASE, **options}
    search(session, features, generations=generations, islands=islands, **options)
    if confirm:
        session.budget = min(session.asked, session.space_size)
        _confirm(session)


def _confirm(session: Session, top: int = 3) -> None:
    """Spend what is left re-measuring: each time, of the ``top`` best by their mean, the one measured
    fewest times (the better mean on a tie)."""
    while session.remaining:
        session.settle()
        counts: dict[int, int] = {}
        for m in session.history:
            i = session.index_of(m.config)
            if i is not None:
                counts[i] = counts.get(i, 0) + 1
        contenders = sorted(session.measured, key=lambda i: session.measured[i])[:top]
        session.measure_index(min(contenders, key=lambda i: (counts.get(i, 0), session.measured[i])))


def _breed(
    session: Session, breeder: _Breeder, parents: np.ndarray, n_children: int, seen: set[int]
) -> set[int]:
    """Up to ``n_children`` distinct children of ``parents`` (best first) not in ``seen``, bred in batches
    of twice the number missing, from at most ``20 * n_children`` pairs."""
    children: set[int] = set()
    tries = 0
    while len(parents) >= 2 and len(children) < n_children and tries < 20 * n_children:
        size = min(2 * (n_children - len(children)), 20 * n_children - tries)
        tries += size
        a, b = _parents(session.rng, len(parents), size), _parents(session.rng, len(parents), size)
        pairs = a != b
        for c in breeder.children(parents[a[pairs]], parents[b[pairs]]).tolist():
            if c not in seen:
                children.add(c)
                if len(children) >= n_children:
                    break
    return children


def _thompson(session: Session, per_tree: np.ndarray, kids: np.ndarray, n: int) -> None:
    """Measure ``n`` of ``kids``: each the best not yet measured by one tree drawn at random (a draw from the
    forest's posterior), so a batch spreads over what different trees believe instead of ``n`` near-copies."""
    picks: list[int] = []  # chosen whole first (no answer changes a pick), so the device can compile ahead
    for _ in range(min(n, session.remaining)):
        free = np.array([c for c in kids if c not in session.proposed and c not in picks], dtype=int)
        if not len(free):
            break
        tree = per_tree[int(session.rng.integers(len(per_tree)))]
        picks.append(int(free[int(np.argmin(tree[free]))]))
    session.announce(picks)
    for i in picks:
        session.measure_index(i)


def _flip_flags(session: Session, ranked: np.ndarray, n: int) -> None:
    """Measure up to ``n`` unmeasured configurations that differ from one of the best measured ones (in rank
    order) in a single two-valued parameter."""
    flags = [j for j in range(session.X.shape[1]) if len(np.unique(session.X[:, j])) == 2]
    lo_hi = {j: tuple(np.unique(session.X[:, j])) for j in flags}
    done = 0
    for i in ranked:
        for j in flags:
            if done >= n or not session.remaining:
                return
            c = session.X[i].copy()
            a, b = lo_hi[j]
            c[j] = b if c[j] == a else a
            k = session.index_of(dict(zip(session.names, c, strict=True)))
            if k is not None and k not in session.proposed:
                session.measure_index(k)
                done += 1


@dataclass
class _Knobs:
    """``search``'s options (its docstring says what each does)."""

    generations: int = GENERATIONS
    clip: float = CLIP
    patience: int = PATIENCE
    polish: float = POLISH
    candidates: int = CANDIDATES_PER_SLOT
    islands: int = ISLANDS
    explore: float = 0.0
    thompson: bool = False
    flips: float = 0.0
    levels: bool = False
    reserve: float = 0.0
    reserve_z: bool = False
    level_explore: float | None = None
    level_thompson: bool = False
    stall_chance: bool = False
    reserve_cap: int = 1 << 30
    reserve_from: int = 0
    levels_from: int = 0
    level_floor: float = 0.0


@dataclass
class _Model:
    """One generation's forest: the measured candidates (``idx``), their capped log times (``y``), every
    tree's prediction for every candidate, their mean and spread, and the generation's scores."""

    idx: np.ndarray
    y: np.ndarray
    per_tree: np.ndarray
    mean: np.ndarray
    std: np.ndarray


class _Search:
    """The state of ``search`` across generations: which island each proposal belongs to, what the forest
    predicted for it, the generation count, the best so far and how long it has not improved, the level turn.
    ``generation`` runs one; its parts (reserve, stuck, explore, polish, breed, fill) are methods in the order
    they spend the generation's slots."""

    def __init__(self, session: Session, features: np.ndarray, knobs: _Knobs) -> None:
        self.session, self.features, self.k = session, features, knobs
        self.n0 = session.used
        self.levels = knobs.levels and session.budget >= knobs.levels_from
        self.breeder = _Breeder(session.X, session.rng)
        self.reserved = min(
            round(knobs.reserve * max(0, session.budget - knobs.reserve_from)), knobs.reserve_cap
        )
        self.polish_n = int(knobs.polish * session.budget)  # the polish: the last ``polish_n`` measurements
        self.batch = max(1, -(-(session.remaining - self.reserved) // knobs.generations))
        self.island = {int(i): k % knobs.islands for k, i in enumerate(session.proposed)}
        # candidate -> the forest's mean and spread for it when it was proposed
        self.predicted: dict[int, tuple[float, float]] = {}
        self.g, self.best, self.stale, self.turn = 0, np.inf, 0, 0

    def _fit(self) -> _Model:
        session = self.session
        _, y = session.training_data(clip=self.k.clip)
        idx = np.array(list(session.measured))
        trees = fitted_trees(session.seed + self.g, self.features[idx], y, TREES, MAX_FEATURES)
        per_tree = forest_predictions(trees, self.features)
        return _Model(idx, y, per_tree, per_tree.mean(axis=0), per_tree.std(axis=0))

    def _islands_of_new(self, before: set[int], island: Any) -> None:
        """Each proposal made since ``before`` joins ``island(i)``."""
        for i in set(self.session.proposed) - before:
            self.island[int(i)] = island(i)

    def generation(self) -> None:
        session, k = self.session, self.k
        m = self._fit()
        proposed_before = set(session.proposed)
        if self.polish_n < session.remaining <= self.polish_n + self.reserved:
            self._reserve(m, proposed_before)
            self.g += 1
            return
        n = min(self.batch, session.remaining)
        last = session.remaining <= self.batch
        score = m.mean - (0.0 if last else KAPPA) * m.std
        ranked = m.idx[np.argsort(m.y, kind="stable")]
        ranked = ranked[np.isfinite([session.measured[i] for i in ranked])]
        seen = set(session.proposed)
        if k.patience and self.stale >= k.patience and not last and n >= 2 and len(ranked):
            n = self._stuck(m, score, ranked, n)
        several = self.levels and len(live_levels(session, session.unmeasured(), k.level_floor)) > 1
        explore = round((k.level_explore if several and k.level_explore is not None else k.explore) * n)
        if explore and not last:
            self._explore(m, explore, several)
            n -= explore
            seen = set(session.proposed)
        if session.remaining <= k.polish * session.budget and len(ranked):
            self._polish(score, ranked, n)
        else:
            self._breed_islands(m, score, ranked, n, last, seen)
        current = min(session.measured.values(), default=np.inf)
        self.stale = self.stale + 1 if current >= self.best else 0
        self.best = min(self.best, current)
        self._fill(score)
        for i in set(session.proposed) - proposed_before:
            self.predicted[int(i)] = (float(m.mean[i]), float(m.std[i]))
        self.g += 1

    def _reserve(self, m: _Model, proposed_before: set[int]) -> None:
        """The reserved share, before the polish: where the trace says a 5% gain is most likely."""
        session = self.session
        chance = _chance_each(session, m.mean, m.std if self.k.reserve_z else None, self.predicted, m.y)
        session.measure_ranked(
            np.lexsort((m.mean, -chance)).argsort(), min(self.batch, session.remaining - self.polish_n)
        )
        for i in set(session.proposed) - proposed_before:
            self.predicted[int(i)] = (float(m.mean[i]), float(m.std[i]))
            self.island[int(i)] = int(session.rng.integers(self.k.islands))

    def _stuck(self, m: _Model, score: np.ndarray, ranked: np.ndarray, n: int) -> int:
        """Stuck: half of this generation goes to the model's best far from the incumbent. Returns the
        slots left."""
        session, k = self.session, self.k
        far = (session.X != session.X[ranked[0]]).sum(axis=1) >= 3
        before = set(session.proposed)
        if k.stall_chance:  # where the trace says a 5% gain is most likely, far from the incumbent
            chance = _chance_each(session, m.mean, m.std, self.predicted, m.y)
            rank = np.lexsort((m.mean, -chance)).argsort().astype(float)
            scores = np.where(far, rank, np.inf)
        else:
            scores = np.where(far, score, np.inf)
        self.turn = _measure_turns(session, scores, n // 2, self.turn, self.levels, k.level_floor)
        self._islands_of_new(
            before, lambda _: min(range(k.islands), key=lambda j: sum(v == j for v in self.island.values()))
        )
        self.stale = 0
        return n - n // 2

    def _explore(self, m: _Model, count: int, several: bool) -> None:
        """The model's most promising candidates anywhere, not only among this generation's children."""
        session, k = self.session, self.k
        before = set(session.proposed)
        if several and k.level_thompson:
            rng = np.random.default_rng([session.seed, self.g])
            self.turn = measure_thompson(session, m.per_tree, count, rng, self.turn, k.level_floor)
        else:
            scores = m.mean - 2 * KAPPA * m.std
            self.turn = _measure_turns(session, scores, count, self.turn, self.levels, k.level_floor)
        self._islands_of_new(before, lambda _: int(session.rng.integers(k.islands)))

    def _polish(self, score: np.ndarray, ranked: np.ndarray, n: int) -> None:
        """The end: the incumbents' neighbours (one parameter changed), so the pick is a local optimum."""
        session = self.session
        if self.k.flips:
            _flip_flags(session, ranked, round(self.k.flips * n))
            n = min(n, session.remaining)
        near = ((session.X[:, None, :] != session.X[ranked[:2]]).sum(axis=2) == 1).any(axis=1)
        session.measure_ranked(np.where(near, score, np.inf), min(n, int(near.sum())))

    def _breed_islands(
        self, m: _Model, score: np.ndarray, ranked: np.ndarray, n: int, last: bool, seen: set[int]
    ) -> None:
        """Each island's share of ``n``: children of its parents, the best by the model measured."""
        session, k = self.session, self.k
        for j in range(k.islands):
            share = n // k.islands + (1 if j < n % k.islands else 0)
            parents = np.array([i for i in ranked if self.island.get(int(i), 0) == j], dtype=int)
            kids = _breed(session, self.breeder, parents, k.candidates * max(1, share), seen)
            if kids and share:
                local = np.full(len(score), np.inf)
                kid = np.array(sorted(kids))
                local[kid] = score[kid]
                before = set(session.proposed)
                if k.thompson and not last and share >= 2:  # one slot: no batch to spread
                    _thompson(session, m.per_tree, kid, min(share, len(kid)))
                else:
                    session.measure_ranked(local, min(share, len(kid)))
                self._islands_of_new(before, lambda _, j=j: j)
                seen |= set(session.proposed)

    def _fill(self, score: np.ndarray) -> None:
        """Too few children: the generation's missing slots go to the model's best (the reserved share is
        not the fill's)."""
        session = self.session
        ahead = self.reserved if session.remaining > self.polish_n else 0
        due = self.n0 + self.batch * (self.g + 1)
        if session.remaining > ahead and session.used < due:
            before = set(session.proposed)
            session.measure_ranked(score, min(session.remaining - ahead, due - session.used))
            self._islands_of_new(before, lambda _: self.g % self.k.islands)


def search(session: Session, features: np.ndarray, **options: Any) -> None:
    """The generations, from whatever the session has measured so far (``transfer`` starts it after the
    prior's best candidates). Options (``_Knobs``): ``generations``, ``clip``, ``patience``, ``polish``,
    ``candidates``, ``islands`` as the module's constants; ``explore``: the share of each generation (but the
    last) measured from the whole pool by the model; ``thompson``: choose children by Thompson sampling over
    the trees rather than by one ranking; ``flips``: flag flips of the best before each polish generation's
    neighbours, as a share of its slots. ``levels``: the whole-pool and stuck shares take turns between the
    live levels (``iterative.live_levels``); while more than one is live, ``level_explore`` (if given)
    replaces ``explore`` and, with ``level_thompson``, that share is ``iterative.measure_thompson``'s batch.
    ``reserve``: a share of the budget (at most ``reserve_cap`` measurements) measured just before the polish,
    the candidates most likely ``MARGIN`` faster than the best (:func:`_chance_each`; ``reserve_z``: by the
    forecast errors over the spread). ``levels_from``: no level turns under a budget of this many;
    ``level_floor``: ``iterative.live_levels``' floor (a level measured too little stays live).
    ``stall_chance``: the stuck share ranked the same way (tried, not kept). Sets ``session.notes``
    (:func:`sureness`)."""
    run = _Search(session, features, _Knobs(**options))
    while session.remaining:
        run.generation()
    session.notes.update(sureness(session, features, run.predicted, run.k.clip))


def _measure_turns(
    session: Session, scores: np.ndarray, n: int, turn: int, levels: bool, floor: float = 0.0
) -> int:
    """Measure the ``n`` lowest ``scores``; with ``levels`` and more than one live level
    (``iterative.live_levels``, with ``floor``), slot ``k`` looks only inside live level
    ``(turn + k) % count``: a level whose typical configuration is slow keeps its share while its best is
    within reach. Returns the next turn."""
    live = live_levels(session, session.unmeasured(), floor) if levels else []
    if len(live) <= 1:
        session.measure_ranked(scores, n)
        return turn
    for _ in range(n):
        if not session.remaining:
            break
        inside = np.where(session.levels == live[turn % len(live)], scores, np.inf)
        pool = session.unmeasured()
        session.measure_ranked(inside if np.isfinite(inside[pool]).any() else scores, 1)
        turn += 1
    return turn


def _residuals(
    session: Session, predicted: dict[int, tuple[float, float]], y_of: dict[int, float], scaled: bool
) -> np.ndarray:
    """The trace's forecast errors: for each measured proposal the search made, its (capped) log time minus
    what the forest predicted for it when it was proposed (``scaled``: over the forest's spread then), sorted;
    the later half only (the model then knew more)."""
    order = sorted((session.proposed[i], i) for i in predicted if i in y_of)
    late = [i for _, i in order[len(order) // 2 :]]
    if scaled:
        late = [i for i in late if predicted[i][1] > 0]
        return np.sort(np.array([(y_of[i] - predicted[i][0]) / predicted[i][1] for i in late], dtype=float))
    return np.sort(np.array([y_of[i] - predicted[i][0] for i in late], dtype=float))


def _chance_each(
    session: Session,
    mean: np.ndarray,
    std: np.ndarray | None,
    predicted: dict[int, tuple[float, float]],
    y: np.ndarray,
) -> np.ndarray:
    """Per candidate, the chance that it is ``MARGIN`` faster than the best measured: its forest mean plus a
    forecast error drawn from the trace's (:func:`_residuals`; with ``std``, the errors over the spread at the
    time, times the candidate's spread now) below log(best / MARGIN); 0 where measured."""
    idx = list(session.measured)
    y_of = dict(zip(idx, y.tolist(), strict=True))
    r = _residuals(session, predicted, y_of, std is not None)
    p = np.zeros(len(mean))
    finite = [session.measured[i] for i in idx if np.isfinite(session.measured[i])]
    if not len(r) or not finite:
        return p
    threshold = np.log(min(finite) / MARGIN)
    pool = session.unmeasured()
    gap = threshold - mean[pool]
    if std is not None:
        gap = np.where(std[pool] > 0, gap / np.maximum(std[pool], 1e-12), -np.inf)
    p[pool] = np.searchsorted(r, gap, side="left") / len(r)
    return p


def sureness(
    session: Session, features: np.ndarray, predicted: dict[int, tuple[float, float]], clip: float = CLIP
) -> dict[str, float]:
    """How sure the search is of its pick: ``p_faster``, its estimate of the chance that a configuration at
    least ``MARGIN`` faster than the best measured remains unmeasured: the most promising unmeasured
    candidate's chance (:func:`_chance_each` with the forest's spread, refitted on every measurement). One
    candidate's chance is a lower bound of the chance that any is; the union of all (their sum as an expected
    count) said 1.0 for nearly every run, the promising candidates' errors being one error, not many
    (calibration of both on the replayed seeds: docs/strategies.md). Empty where the model chose nothing."""
    session.settle()
    if not session.measured or not predicted:
        return {}
    _, y = session.training_data(clip=clip)
    idx = np.array(list(session.measured))
    trees = fitted_trees(session.seed + 7919, features[idx], y, TREES, MAX_FEATURES)
    per_tree = forest_predictions(trees, features)
    chance = _chance_each(session, per_tree.mean(axis=0), per_tree.std(axis=0), predicted, y)
    return {"p_faster": round(float(chance.max(initial=0.0)), 4)}
