"""Issue 45: ``evolve``'s level turns, its reserved share before the polish, and how sure it says it is
(``p_faster``), on small synthetic spaces (deterministic: every session is seeded)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from launchtune.pipeline.store.datasets import Dataset, load_datasets
from launchtune.pipeline.strategies import evolve
from launchtune.pipeline.strategies.base import Session
from launchtune.pipeline.strategies.evaluate import run_one
from launchtune.pipeline.strategies.replay import ReplayWorkload


def _levels_session(budget: int = 12) -> Session:
    """Two levels: ``level`` 0 uses ``size`` only (``knob`` is inactive there), level 1 uses both."""
    rows = [
        {"level": 0, "size": z, "knob": k, "time": 1.0 + z, "status": "ok"} for z in (1, 2, 3) for k in (0, 1)
    ]
    rows += [
        {"level": 1, "size": z, "knob": k, "time": 0.5 + z + k, "status": "ok"}
        for z in (1, 2, 3)
        for k in (0, 1)
    ]
    data = Dataset("toy", ["level", "size", "knob"], pd.DataFrame(rows), inactive=[["level", [0], ["knob"]]])
    return Session(ReplayWorkload(data, seed=0), budget, seed=0)


def _grid_session(budget: int, seed: int = 0) -> Session:
    """A recorded space of 4 x 4 sizes and a flag, every configuration once: a bowl, and one narrow corner
    (size 4, 4 with the flag on) twice as fast as anything near it."""
    rows = []
    for a, b, f in itertools.product([1, 2, 3, 4], [1, 2, 3, 4], [0, 1]):
        t = 2.0 + 0.3 * (a - 2) ** 2 + 0.3 * (b - 2) ** 2 + 0.5 * f
        rows.append({"a": a, "b": b, "flag": f, "time": 0.8 if (a, b, f) == (4, 4, 1) else t, "status": "ok"})
    data = Dataset("grid", ["a", "b", "flag"], pd.DataFrame(rows))
    return Session(ReplayWorkload(data, seed=seed), budget, seed=seed)


def test_the_whole_pool_share_takes_turns_between_the_levels_still_in_reach(monkeypatch):
    import launchtune.pipeline.strategies.iterative as iterative

    monkeypatch.setattr(iterative, "LIVE", 1.5)  # the toy's levels are 1.33x apart
    for levels, expected in ((True, [0, 1]), (False, [1, 1])):
        session = _levels_session()
        session.measure_index(session.index_of({"level": 0, "size": 1, "knob": 0}))  # 2.0
        session.measure_index(session.index_of({"level": 1, "size": 1, "knob": 0}))  # 1.5
        scores = np.where(session.X[:, 0] == 1, 1.0, 5.0)  # the model prefers level 1 everywhere
        evolve._measure_turns(session, scores, 2, 0, levels)
        assert sorted(m.config["level"] for m in session.history[2:]) == expected, levels


def test_chance_of_a_5_percent_gain_is_zero_where_measured_and_follows_mean_and_spread():
    session = _grid_session(budget=32)
    pairs = [(2, 2), (1, 1), (3, 3), (2, 3), (1, 2), (3, 2), (2, 1), (1, 3)]
    measured = [session.index_of({"a": a, "b": b, "flag": 0}) for a, b in pairs]
    for i in measured:
        session.measure_index(i)
    _, y = session.training_data(clip=evolve.CLIP)
    # the trace (what the forest predicted minus what was measured, its spread 0.1): the first half of the
    # proposals wildly optimistic, which the estimate leaves out; the later half -0.1, -0.03, 0.03, 0.1
    errors = (1.0, 1.0, 1.0, 1.0, 0.1, 0.03, -0.03, -0.1)
    predicted = {i: (float(v) + e, 0.1) for i, v, e in zip(measured, y, errors, strict=True)}
    best = np.log(min(session.measured.values()))
    n = len(session.X)
    mean = np.full(n, best + 1.0)
    std = np.full(n, 0.1)
    fast, near, wide = (session.index_of({"a": 4, "b": b, "flag": 1}) for b in (4, 3, 2))
    mean[fast] = best - 0.5  # clearly 5% faster whatever the error
    mean[near] = mean[wide] = best - np.log(evolve.MARGIN) + 0.05  # just short of 5% faster
    std[wide] = 1.0
    p = evolve._chance_each(session, mean, None, predicted, y)
    assert p[measured].tolist() == [0.0] * 8 and 0.0 <= p.min() and p.max() <= 1.0
    assert p[fast] == 1.0 and p[near] == 0.25 and p[mean > best + 0.2].max() == 0.0
    z = evolve._chance_each(session, mean, std, predicted, y)
    assert z[wide] > z[near]  # the same mean, more spread: more likely 5% faster


@pytest.mark.parametrize("budget", [3, 12, 17, 25, 32])
def test_evolve_spends_its_budget_exactly_with_the_reserved_share(budget):
    session = _grid_session(budget)
    evolve.tune(session, reserve=0.25, reserve_from=0)  # the default reserves only beyond 100
    session.settle()
    assert session.used == budget == len(session.proposed)
    # an estimate once the model chose something (a budget of 3 is all initial design)
    assert ("p_faster" in session.notes) == (budget > 8)


@pytest.mark.parametrize("budget", [12, 17, 25])
def test_evolve_says_a_chance_between_0_and_1(budget):
    session = _grid_session(budget)
    evolve.tune(session)
    assert 0.0 <= session.notes["p_faster"] <= 1.0


def test_evolve_says_how_sure_it_is_and_is_sure_once_everything_is_measured():
    session = _grid_session(budget=32)  # the whole space
    evolve.tune(session)
    assert session.notes["p_faster"] == 0.0  # nothing is left unmeasured
    first = [run_one_grid(seed) for seed in range(3)]
    assert first == [run_one_grid(seed) for seed in range(3)]  # the same seed, the same estimate
    assert all(0.0 <= p <= 1.0 for p in first)


def run_one_grid(seed: int) -> float:
    session = _grid_session(budget=12, seed=seed)
    evolve.tune(session)
    return session.notes["p_faster"]


def test_the_json_line_carries_the_estimate(cache_file):
    (d,) = load_datasets(cache_file)
    record = run_one(d, "evolve", 20, 0)
    assert 0.0 <= record["p_faster"] <= 1.0
    assert "p_faster" not in run_one(d, "random", 20, 0)  # a strategy that says nothing


def test_the_reserve_changes_what_is_measured_and_not_how_much():
    runs = {}
    for reserve in (0.0, 0.4):
        session = _grid_session(budget=24, seed=1)
        evolve.tune(session, reserve=reserve, reserve_from=0)
        runs[reserve] = [tuple(m.config.values()) for m in session.history]
    assert len(runs[0.0]) == len(runs[0.4]) == 24
    assert runs[0.0][:8] == runs[0.4][:8]  # the same initial design
    assert runs[0.0] != runs[0.4]


def _wide_session(levels: bool, budget: int = 130) -> Session:
    """180 candidates: ``level`` 0 with 60 sizes, level 1 with 60 sizes x a knob; with ``levels`` the knob is
    inactive on level 0 (a space with levels), else every row uses both (the same rows, no levels)."""
    rows = [
        {"level": 0, "size": z, "knob": 0, "time": 2.0 + ((z * 7) % 13) / 10, "status": "ok"}
        for z in range(60)
    ]
    rows += [
        {"level": 1, "size": z, "knob": k, "time": 1.5 + ((z * 5 + k) % 17) / 10, "status": "ok"}
        for z in range(60)
        for k in (0, 1)
    ]
    inactive = [["level", [0], ["knob"]]] if levels else []
    data = Dataset("wide", ["level", "size", "knob"], pd.DataFrame(rows), inactive=inactive)
    return Session(ReplayWorkload(data, seed=0), budget, seed=3)


def test_the_default_reserves_beyond_100_and_takes_turns_only_where_there_are_levels(monkeypatch):
    import launchtune.pipeline.strategies.iterative as iterative

    monkeypatch.setattr(iterative, "LIVE", 1.5)  # both of the toy's levels in reach (their best: 2.0, 1.5)

    def history(space_has_levels: bool, budget: int = 130, **options) -> list[tuple]:
        session = _wide_session(space_has_levels, budget)
        evolve.tune(session, **options)
        assert session.used == budget
        return [tuple(m.config.values()) for m in session.history]

    no_turns = {"levels": False, "level_explore": None, "level_thompson": False}
    assert _wide_session(True).levels is not None and _wide_session(False).levels is None
    # without levels the turns never act: the same search with them or without
    assert history(False) == history(False, **no_turns)
    # with levels (issue 45's second session) they do, and so does the reserve: 6 measurements (a fifth of 30)
    assert history(True) != history(True, **no_turns)
    assert history(True, **no_turns) != history(True, **no_turns, reserve=0.0)
    assert history(False) != history(False, reserve=0.0)
    # under 100 measurements (``TURNS_FROM``) neither acts: with levels as without the turns
    assert history(True, 60) == history(True, 60, **no_turns) != history(True, 60, levels_from=0)


def test_a_level_measured_too_little_stays_live_while_within_twice_the_best():
    from launchtune.pipeline.strategies.iterative import FLOOR_WITHIN, LIVE, live_levels

    assert LIVE < 2.0 / 1.5 <= FLOOR_WITHIN  # level 0's best (2.0) is out of LIVE's reach, inside the floor's
    session = _levels_session()
    for level, size, knob in ((1, 1, 0), (1, 2, 0), (1, 1, 1), (1, 3, 0), (0, 1, 0)):  # 1.5 ... and 2.0
        session.measure_index(session.index_of({"level": level, "size": size, "knob": knob}))
    # the session's level of each value of the ``level`` parameter (its numbering is the session's own)
    slow, fast = (int(session.levels[session.index_of({"level": v, "size": 1, "knob": 0})]) for v in (0, 1))
    pool = session.unmeasured()
    assert live_levels(session, pool) == [fast]  # no floor: level 0 is 1.33x the best, out of reach
    # a fair share is 5 / 2 measurements: level 0's one is under half of it, so it stays searched
    assert live_levels(session, pool, floor=0.5) == sorted([slow, fast])
    assert live_levels(session, pool, floor=0.3) == [fast]  # 1 is not under 0.3 x 2.5
    far = _levels_session()
    for level, size, knob in ((1, 1, 0), (1, 2, 0), (1, 1, 1), (1, 3, 0), (0, 3, 0)):  # level 0's 4.0: 2.7x
        far.measure_index(far.index_of({"level": level, "size": size, "knob": knob}))
    assert live_levels(far, far.unmeasured(), floor=0.5) == [fast]


def test_the_default_floor_acts_only_on_a_space_with_levels():
    def history(space_has_levels: bool, **options) -> list[tuple]:
        session = _wide_session(space_has_levels, 130)
        evolve.tune(session, **options)
        return [tuple(m.config.values()) for m in session.history]

    assert evolve.WORST_CASE["level_floor"] == evolve.LEVEL_FLOOR > 0
    assert history(False) == history(False, level_floor=0.0)
    assert history(True) != history(True, level_floor=0.0)


def test_covering_the_levels_splits_the_initial_design_between_them():
    """Issue 53: ``cover_levels`` gives each level its even part of the initial design (20 of 80 here), where
    the plain design follows the features alone; without levels the option changes nothing."""

    def first(levels: bool, **options) -> list[tuple]:
        session = _wide_session(levels, budget=80)
        evolve.tune(session, **options)
        return [tuple(m.config.values()) for m in session.history[:20]]

    plain, covered = first(True), first(True, cover_levels=True)
    assert sorted(np.bincount([c[0] for c in covered])) == [10, 10]
    assert plain != covered
    assert first(False) == first(False, cover_levels=True)


def test_confirming_re_measures_the_contenders_with_the_last_measurements():
    """Issue 53: with ``confirm`` the budget is spent exactly, its last measurements re-measure configurations
    already measured (the best by their mean), and the pick is on their means; without it, as before."""
    plain, confirmed = _wide_session(True, budget=60), _wide_session(True, budget=60)
    evolve.tune(plain)
    evolve.tune(confirmed, confirm=6)
    assert confirmed.used == plain.used == 60 and confirmed.budget == 60
    first = [tuple(m.config.values()) for m in confirmed.history[:54]]
    last = [tuple(m.config.values()) for m in confirmed.history[54:]]
    assert set(last) <= set(first) and len(set(first)) == 54
    assert len(set(tuple(m.config.values()) for m in plain.history)) == 60
