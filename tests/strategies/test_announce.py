"""A search tells its answers the proposals it has chosen whole (``Session.announce``), so a device that
compiles per configuration compiles a generation while measuring its first members; being told changes
nothing the search does; nor do the threads its trees are fitted on."""

from __future__ import annotations

from launchtune.pipeline.store.datasets import load_datasets
from launchtune.pipeline.strategies import get_strategy
from launchtune.pipeline.strategies.base import Session, WorkloadAnswers
from launchtune.pipeline.strategies.replay import ReplayWorkload


class Told(WorkloadAnswers):
    def __init__(self, workload, repeats):
        super().__init__(workload, repeats)
        self.told: list[list[dict]] = []
        self.submitted: list[dict] = []

    def ahead(self, configs):
        self.told.append([dict(c) for c in configs])

    def submit(self, order, config, round):
        self.submitted.append(dict(config))
        super().submit(order, config, round)


def _run(dataset, answers_of):
    workload = ReplayWorkload(dataset, seed=3)
    answers = answers_of(workload)
    session = Session(workload, 30, seed=1, answers=answers)
    get_strategy("evolve")(session)
    session.settle()
    return session, answers


def test_a_search_announces_what_it_then_proposes_and_proposes_the_same(cache_file):
    dataset = load_datasets(cache_file)[0]
    told_session, told = _run(dataset, lambda w: Told(w, 7))
    plain_session, _ = _run(dataset, lambda w: WorkloadAnswers(w, 7))
    assert told_session.proposals == plain_session.proposals  # being told changes nothing
    assert told.told[0] == told.submitted[:8]  # the initial design (8 at this budget), announced whole
    for batch in told.told:  # each announced batch is proposed next, in the order announced
        assert len(batch) >= 2
        start = told.submitted.index(batch[0])
        assert told.submitted[start : start + len(batch)] == batch


def test_trees_on_threads_give_the_numbers_of_one_thread(monkeypatch):
    import numpy as np

    from launchtune.pipeline.strategies import estimators

    rng = np.random.default_rng(0)
    X, y = rng.random((200, 30)), rng.random(200)
    pool = rng.random((3000, 30))
    out = []
    for threads in (1, 4):
        monkeypatch.setattr(estimators, "FOREST_THREADS", threads)
        model = estimators.forest(5, n_estimators=40).fit(X, y)
        assert model.n_jobs == threads
        out.append(estimators.forest_predictions(model, pool))
    assert np.array_equal(out[0], out[1])


def test_trees_grown_without_the_forest_are_the_forests_trees(monkeypatch):
    """``fitted_trees`` skips the forest's per-tree set-up (issue 53), not its numbers: every tree predicts
    what the same forest's tree predicts, with all features and with a share of them per split, grown on
    one thread or several."""
    import numpy as np

    from launchtune.pipeline.strategies import estimators

    rng = np.random.default_rng(1)
    X, y = rng.random((150, 60)), rng.random(150)
    pool = rng.random((2000, 60))
    for max_features, threads in ((1.0, 1), (1.0, 4), ("sqrt", 1)):
        monkeypatch.setattr(estimators, "FOREST_THREADS", threads)
        model = estimators.forest(7, n_estimators=12, max_features=max_features).fit(X, y)
        trees = estimators.fitted_trees(7, X, y, 12, max_features)
        assert np.array_equal(
            estimators.forest_predictions(model, pool), estimators.forest_predictions(trees, pool)
        )
