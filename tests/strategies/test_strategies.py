"""Every strategy on small recorded datasets: budgets respected exactly, seeds reproduce, optima found."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from launchtune.pipeline.store.datasets import Dataset, load_datasets
from launchtune.pipeline.strategies import STRATEGIES, get_strategy, strategy_names
from launchtune.pipeline.strategies.base import BudgetExhausted, Session, StrategyError
from launchtune.pipeline.strategies.evaluate import run_one
from launchtune.pipeline.strategies.replay import ReplayWorkload
from tests.strategies.conftest import write_sweep

SEARCHERS = [s for s in STRATEGIES if s not in ("per_kernel_exhaustive", "transfer")]


@pytest.mark.parametrize("strategy", SEARCHERS)
@pytest.mark.parametrize("budget", [1, 7, 25])
def test_budget_is_spent_exactly(cache_file, strategy, budget):
    (d,) = load_datasets(cache_file)
    session = Session(ReplayWorkload(d, seed=1), budget, seed=2, kernels=d.kernels, device={"dataset": d})
    get_strategy(strategy)(session)
    assert session.used == budget
    assert len({tuple(m.config.values()) for m in session.history}) == budget  # no configuration twice


def test_session_refuses_past_budget(cache_file):
    (d,) = load_datasets(cache_file)
    session = Session(ReplayWorkload(d), 2, seed=0)
    session.measure_random(5)
    assert session.used == 2
    with pytest.raises(BudgetExhausted):
        session.measure_index(0)


@pytest.mark.parametrize("strategy", [*SEARCHERS, "default"])
def test_a_seed_reproduces_a_run(cache_file, strategy):
    (d,) = load_datasets(cache_file)
    first = run_one(d, strategy, 12, seed=5)
    assert run_one(d, strategy, 12, seed=5) == first
    assert set(first) >= {"strategy", "budget", "seed", "config", "time", "optimum"}


def test_seeds_differ(cache_file):
    (d,) = load_datasets(cache_file)
    picks = {tuple(run_one(d, "random", 5, seed=s)["config"].values()) for s in range(6)}
    assert len(picks) > 1


def test_exhaustive_finds_the_known_optimum(cache_file):
    (d,) = load_datasets(cache_file)
    rec = run_one(d, "per_kernel_exhaustive", 60, seed=0)
    assert rec["config"] == {"block_size_x": 64, "block_size_y": 4, "tile": 2}
    assert rec["time"] == rec["optimum"] and rec["measured"] == 60


def test_exhaustive_refuses_a_budget_below_the_space(cache_file):
    (d,) = load_datasets(cache_file)
    with pytest.raises(StrategyError, match="needs a budget of 60"):
        run_one(d, "per_kernel_exhaustive", 59, seed=0)


def test_per_kernel_exhaustive_composes_the_separable_optimum(sweep_file):
    (d,) = load_datasets(sweep_file)
    rec = run_one(d, "per_kernel_exhaustive", 2 * 12 + 1, seed=0)
    assert rec["config"] == {
        "flux.blocks": 200,
        "flux.threads": 128,
        "update.blocks": 400,
        "update.threads": 64,
    }
    assert rec["time_source"] == "additive" and rec["time"] == pytest.approx(rec["optimum"])


def test_per_kernel_exhaustive_measures_each_configuration_once(sweep_file, tmp_path):
    (d,) = load_datasets(sweep_file)  # the default (100, 32) is in both kernels' grids: one measurement
    assert run_one(d, "per_kernel_exhaustive", 2 * 12 - 1 + 1, seed=0)["measured"] == 24
    # the paper's sweep: the default lies outside the grid, so no recorded row is the all-default launch;
    # it is measured once (answered additively by the replay), then the composed optimum
    outside = {"flux.blocks": 1000, "flux.threads": 32, "update.blocks": 1000, "update.threads": 32}
    (d,) = load_datasets(write_sweep(tmp_path / "outside.parquet", default=outside))
    assert d.default == outside
    with pytest.raises(StrategyError, match="needs a budget of 26"):
        run_one(d, "per_kernel_exhaustive", 25, seed=0)
    workload = ReplayWorkload(d)
    session = Session(workload, 26, seed=0, kernels=d.kernels, device={"dataset": d})
    get_strategy("per_kernel_exhaustive")(session)
    configs = [tuple(m.config.values()) for m in session.history]
    assert len(set(configs)) == len(configs) == 26
    assert configs.count(tuple(outside.values())) == 1
    assert workload.recorded_time(outside)[1] == "additive"
    rec = run_one(d, "per_kernel_exhaustive", 26, seed=0)
    best = {"flux.blocks": 200, "flux.threads": 128, "update.blocks": 400, "update.threads": 64}
    assert rec["config"] == best
    assert rec["time_source"] == "additive" and rec["optimum_source"] == "additive"


def test_additive_strategy_uses_per_kernel_times(sweep_file):
    (d,) = load_datasets(sweep_file)
    rec = run_one(d, "random_additive", 20, seed=1)
    assert rec["measured"] == 20
    assert rec["time"] / rec["optimum"] < 1.02


def test_model_strategies_beat_random_on_a_smooth_space(cache_file):
    """Averaged over seeds, learning from measurements must pay on a bowl-shaped space."""
    (d,) = load_datasets(cache_file)

    def mean_ratio(strategy: str) -> float:
        return sum(run_one(d, strategy, 10, s)["ratio"] for s in range(8)) / 8

    rand = mean_ratio("random")
    assert mean_ratio("iterative") < rand
    assert mean_ratio("bayes") < rand


def test_transfer_uses_the_other_gpus(cache_dir):
    datasets = load_datasets(cache_dir)
    target, prior = datasets[0], datasets[1:]
    rec = run_one(target, "transfer", 6, seed=0, prior=prior)
    assert rec["measured"] == 6 and rec["time"] / rec["optimum"] < 1.1
    with pytest.raises(StrategyError, match="other GPUs"):
        run_one(target, "transfer", 6, seed=0, prior=[])


def test_unknown_strategy_is_a_user_error():
    with pytest.raises(StrategyError, match="unknown strategy 'nope'"):
        get_strategy("nope")
    assert "default" in strategy_names()


@pytest.mark.parametrize("budget", [1, 7, 30])
def test_transfer_spends_its_budget_and_reproduces(cache_dir, budget):
    datasets = load_datasets(cache_dir)
    target, prior = datasets[0], datasets[1:]
    first = run_one(target, "transfer", budget, seed=4, prior=prior)
    assert first["measured"] == budget
    assert run_one(target, "transfer", budget, seed=4, prior=prior) == first


def test_evolve_finds_the_bowls_optimum_and_beats_random(cache_file):
    (d,) = load_datasets(cache_file)
    ours = [run_one(d, "evolve", 20, s)["ratio"] for s in range(6)]
    rand = [run_one(d, "random", 20, s)["ratio"] for s in range(6)]
    assert sum(ours) < sum(rand) and min(ours) == 1.0


def _flagged_session(budget: int) -> Session:
    """A recorded space of one size (1..3) and two on/off flags, every configuration recorded once."""
    rows = [
        {"size": s, "shmem": f, "cache": g, "time": float(s + f + g), "status": "ok"}
        for s, f, g in itertools.product([1, 2, 3], [0, 1], [0, 1])
    ]
    frame = pd.DataFrame(rows)
    return Session(ReplayWorkload(Dataset("toy", ["size", "shmem", "cache"], frame)), budget, seed=0)


def test_flag_flips_try_each_two_valued_parameter_of_the_best_in_rank_order_once():
    from launchtune.pipeline.strategies.evolve import _flip_flags

    session = _flagged_session(budget=7)
    best, second, done = (
        session.index_of(c)
        for c in (
            {"size": 1, "shmem": 0, "cache": 0},
            {"size": 2, "shmem": 1, "cache": 1},
            {"size": 1, "shmem": 1, "cache": 0},
        )
    )
    for i in (best, second, done):
        session.measure_index(i)
    _flip_flags(session, [best, second], 3)
    flipped = [tuple(m.config.values()) for m in session.history[3:]]
    # the best's shmem flip is already measured: its cache flip, then the second's two flips; never 'size'
    assert flipped == [(1, 0, 1), (2, 0, 1), (2, 1, 0)]
    _flip_flags(session, list(range(len(session.X))), 5)  # one measurement left in the budget: it stops there
    assert session.used == session.budget == 7


def test_iterative_finds_the_fused_cfd_spaces_narrow_best_corner():
    """Issue 16: on the replayed H100 sweep of the fused CFD space with ``tile.arith`` (6,000 rows; 1 within
    3% of the best, of the ``stage`` level, whose median is 2.4x the best) ``iterative`` gets within 3% of
    the best with 100 measurements, on average over seeds 0-4 (about 4 s a run). Before a Thompson draw's
    ties went to the forest's mean and measured groups of equivalent candidates were left out, it scored
    1.111 (10 seeds), and one run of the tie-break alone stayed on the directional level (1.506)."""
    from tests.conftest import REPO

    (d,) = load_datasets(REPO / "data/cfd/h100/sweep_fused_arith/merged")
    ratios = [run_one(d, "iterative", 100, seed)["ratio"] for seed in range(5)]
    assert sum(ratios) / len(ratios) <= 1.03, ratios


def _twin_session(order: list[int]) -> Session:
    """Two levels: ``level`` 0 uses ``size`` only (``knob`` is inactive there, so each size appears twice,
    twins that run the same code), level 1 uses both; rows in the given order."""
    from launchtune.pipeline.store.datasets import Dataset as D

    rows = [
        {"level": 0, "size": z, "knob": k, "time": 1.0 + z, "status": "ok"} for z in (1, 2, 3) for k in (0, 1)
    ]
    rows += [
        {"level": 1, "size": z, "knob": k, "time": 0.5 + z + k, "status": "ok"}
        for z in (1, 2, 3)
        for k in (0, 1)
    ]
    frame = pd.DataFrame([rows[i] for i in order])
    data = D("toy", ["level", "size", "knob"], frame, inactive=[["level", [0], ["knob"]]])
    return Session(ReplayWorkload(data, seed=0), 12, seed=0)


def test_a_measured_candidate_takes_its_twins_out_of_the_unmeasured_pool():
    session = _twin_session(list(range(12)))
    assert session.unused is not None and len(session.unmeasured()) == 12
    twin_a, twin_b = (session.index_of({"level": 0, "size": 2, "knob": k}) for k in (0, 1))
    session.measure_index(twin_a)
    pool = set(session.unmeasured().tolist())
    assert twin_a not in pool and twin_b not in pool and len(pool) == 10  # the same code: one measurement
    other = session.index_of({"level": 1, "size": 2, "knob": 0})
    session.measure_index(other)
    assert session.index_of({"level": 1, "size": 2, "knob": 1}) in session.unmeasured()  # knob used there


def test_a_thompson_draws_ties_go_to_the_forests_mean_whatever_the_row_order():
    """A tree ranks many candidates equal (its leaf); which one is measured must not depend on where the rows
    sit in the dataset. Tree 0 ties all of level 1, tree 1 ranks them; whichever tree is drawn, the pick is
    the candidate the forest's mean ranks first, in either row order (``np.argmin`` took the first row)."""
    import numpy as np

    from launchtune.pipeline.strategies.iterative import measure_thompson

    for seed in range(4):  # draws of tree 0 and of tree 1
        picks = []
        for order in (list(range(12)), list(range(11, -1, -1))):
            session = _twin_session(order)
            level1 = [session.index_of({"level": 1, "size": z, "knob": k}) for z in (1, 2, 3) for k in (0, 1)]
            per_tree = np.full((2, 12), 5.0)
            per_tree[0, level1] = 1.0
            per_tree[1, level1] = [3.0, 2.0, 1.5, 1.2, 1.1, 2.5]
            measure_thompson(session, per_tree, 1, np.random.default_rng(seed))
            picks.append(session.history[-1].config)
        assert picks[0] == picks[1] == {"level": 1, "size": 3, "knob": 0}, (seed, picks)


def test_thompson_slots_take_turns_over_the_levels_still_in_reach(monkeypatch):
    """A level whose typical configuration is slow can hold the fastest (the fused CFD space's stage level):
    while two levels' best measurements are within ``LIVE`` of each other, the slots of a Thompson batch take
    turns between them even where every tree prefers one; once one level falls behind, the trees decide."""
    import numpy as np

    import launchtune.pipeline.strategies.iterative as iterative
    from launchtune.pipeline.strategies.iterative import live_levels, measure_thompson

    monkeypatch.setattr(iterative, "LIVE", 1.5)  # the toy's levels are 1.33x apart
    session = _twin_session(list(range(12)))
    assert session.levels is not None
    level0 = [session.index_of({"level": 0, "size": z, "knob": 0}) for z in (1, 2, 3)]
    level1 = [session.index_of({"level": 1, "size": z, "knob": k}) for z in (1, 2, 3) for k in (0, 1)]
    session.measure_index(level0[0])  # 2.0
    session.measure_index(level1[0])  # 1.5: level 0 within LIVE of it
    assert len(live_levels(session, session.unmeasured())) == 2
    per_tree = np.full((4, 12), 5.0)
    per_tree[:, level1] = 1.0  # every tree prefers level 1
    before = len(session.history)
    measure_thompson(session, per_tree, 2, np.random.default_rng(0))
    levels = sorted(m.config["level"] for m in session.history[before:])
    assert levels == [0, 1]  # one slot each, not both in level 1

    # a level with fewer unmeasured candidates than its turns: the slot goes elsewhere, never to one chosen
    session = _twin_session(list(range(12)))
    for i in level0[:2] + level1[:1]:
        session.measure_index(i)  # level 0 keeps one size unmeasured (two twin rows), level 1 five rows
    assert len(live_levels(session, session.unmeasured())) == 2
    wide = np.full((8, 12), 5.0)
    wide[:, level1] = 1.0
    measure_thompson(session, wide, 6, np.random.default_rng(0))  # three turns for level 0's two rows
    new = [tuple(m.config.values()) for m in session.history[3:]]
    assert len(new) == len(set(new)) == 6

    session = _twin_session(list(range(12)))
    session.measure_index(level0[2])  # 4.0: more than LIVE times level 1's best
    session.measure_index(level1[0])  # 1.5
    assert len(live_levels(session, session.unmeasured())) == 1
    measure_thompson(session, per_tree, 2, np.random.default_rng(0))
    assert [m.config["level"] for m in session.history[2:]] == [1, 1]
