"""What every strategy is given and returns: a measuring session with a hard budget, and the pick.

A strategy is a function ``tune(session) -> None`` that spends ``session.budget`` measurements through
``session.measure``; the pick is always the best configuration it *measured* (a model's prediction alone is
never trusted), so a strategy's quality is the recorded time of that pick. The session refuses a measurement
past the budget, which makes "budgets are respected exactly" a property of the session, not of each strategy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from launchtune.kernels.space import Config
from launchtune.kernels.workload import Workload

from ..errors import UserError

POOL_LIMIT = 50_000  # a larger space is searched over a seeded random pool of this many configurations


class BudgetExhausted(RuntimeError):
    """A strategy asked for a measurement past its budget (a bug in the strategy)."""


class StrategyError(UserError):
    """A strategy cannot run as asked (a budget too small for exhaustive search, no data for transfer)."""


@dataclass
class Measurement:
    config: Config
    time: float  # ms; inf when the configuration failed
    kernels: dict[str, float] = field(default_factory=dict)


@dataclass
class Answer:
    """The answer to proposal ``order``: its time (ms; inf where the configuration failed) and kernels'."""

    order: int
    time: float
    kernels: dict[str, float] = field(default_factory=dict)


class Answers(Protocol):
    """Where a session's measurements come from. ``width``: how many may be in flight at once."""

    width: int

    def submit(self, order: int, config: Config, round: int) -> None:
        """Start measuring proposal ``order`` (``round``: its proposal round, ``Session.rounds``)."""

    def collect(self, event: int, block: bool) -> list[Answer]:
        """The answers that are in at delivery point ``event``, in arrival order; ``block``: wait for one."""

    def recorded(self, event: int) -> bool:
        """Whether the answers of delivery point ``event`` are a recording (then the session never waits)."""

    # Optional: ``ahead(configs)``, the configurations to be proposed next (``Session.announce``), so the
    # device can compile them while it measures the first ones; answers without it are not told.


class WorkloadAnswers:
    """The workload measures each proposal at once, one at a time: the sequential session."""

    width = 1

    def __init__(self, workload: Workload, repeats: int) -> None:
        self.workload, self.repeats = workload, repeats
        self._ready: list[Answer] = []

    def submit(self, order: int, config: Config, round: int) -> None:
        timing = self.workload.run(config, self.repeats)
        ok = timing.extra.get("status", "ok") == "ok"
        t = float(timing.total) if ok else float("inf")
        self._ready.append(Answer(order, t, dict(timing.kernels)))

    def collect(self, event: int, block: bool) -> list[Answer]:
        ready, self._ready = self._ready, []
        return ready

    def recorded(self, event: int) -> bool:
        return False


class Session:
    """Candidates, features and a budgeted ``measure`` over one workload.

    ``prior`` holds datasets of other devices for transfer strategies; ``rng`` is the strategy's only source
    of randomness, seeded by ``seed``.

    **Answers.** Where measurements come from is ``answers`` (:class:`Answers`): by default the workload
    itself, one measurement at a time (replay, ``launchtune strategies``); a live sweep passes its
    Dask workers (``pipeline.sweep.search``), several measurements in flight at once. A strategy cannot tell
    them apart; it sees one rule: ``measure`` *proposes* a configuration, which is then ``proposed`` (never
    offered again) and spends a unit of budget, and returns once fewer than ``answers.width`` proposals are
    waiting for their answer. Answers reach ``measured`` and ``history`` only inside ``measure``,
    ``training_data`` and ``settle`` (the *delivery points*, numbered in order), so a run is a function of its
    seed and of which answers reached it at which delivery point: ``deliveries`` records that, and a resumed
    sweep replays it (``pipeline.sweep.search``). With one measurement in flight (``width`` 1) every answer
    arrives inside its own ``measure``: the run is exactly the sequential one.
    """

    def __init__(
        self,
        workload: Workload,
        budget: int,
        seed: int,
        repeats: int = 7,
        prior: Sequence[Any] = (),
        kernels: Mapping[str, Sequence[str]] | None = None,
        device: Mapping[str, Any] | None = None,
        answers: Answers | None = None,
    ) -> None:
        if budget < 1:
            raise StrategyError(f"budget must be at least 1 measurement, got {budget}")
        self.workload = workload
        self.asked = int(budget)  # what the caller asked; ``budget`` is at most the space (below)
        self.seed = int(seed)
        self.repeats = int(repeats)
        self.prior = list(prior)
        self.kernels = {k: list(v) for k, v in (kernels or {}).items()}
        self.device = dict(device or {})
        self.rng = np.random.default_rng(seed)
        self.space = workload.space()
        self.names = self.space.names
        self.answers: Answers = answers if answers is not None else WorkloadAnswers(workload, repeats)
        fixed = workload.candidates()
        if fixed is None and self.space.cardinality <= POOL_LIMIT:
            self.X = self.space.rows().astype(float)  # the valid configurations, in product order
        else:
            configs = fixed if fixed is not None else self.space.sample(POOL_LIMIT, seed)
            self.X = np.array([[c[n] for n in self.names] for c in configs], dtype=float).reshape(
                len(configs), len(self.names)
            )
        self._index = {row: i for i, row in enumerate(map(tuple, self.X.astype(np.int64).tolist()))}
        # candidates x parameters, True where a candidate does not use the parameter (the space's inactive
        # rules: the seven kernels' launches under a fused level); None where the space has no such rules
        self.unused = self.space.unused_mask(self.X) if self.space.inactive else None
        # Candidates that differ only in parameters they do not use run the same code (a fused level under
        # different seven-kernel launches): one group each, and a proposed group is not offered again.
        self._group: np.ndarray | None = None
        if self.unused is not None:
            _, self._group = np.unique(np.where(self.unused, 0.0, self.X), axis=0, return_inverse=True)
        self._measured_groups: set[int] = set()
        # per candidate, its level: which parameters it uses (one level per pattern of ``unused``: the fused
        # CFD space's ``fusion`` values); None without inactive rules
        self.levels: np.ndarray | None = None
        if self.unused is not None:
            _, levels = np.unique(self.unused, axis=0, return_inverse=True)
            self.levels = levels.ravel()
        # Every strategy measures only candidates not yet measured (``unmeasured``), so a budget over the
        # number of distinct candidates could never be spent: its ``while session.remaining`` loops would
        # spin forever. The budget is the space at most; the run then measures the whole space and says so
        # (``capped``).
        self.space_size = int(len(np.unique(self.X if self._group is None else self._group, axis=0)))
        self.budget = min(self.asked, self.space_size)
        self.history: list[Measurement] = []  # answers in the order they reached the strategy
        self.measured: dict[int, float] = {}  # candidate index -> mean of its measurements (inf: failed)
        self._counts: dict[int, int] = {}
        self.proposals: list[Config] = []  # every proposal, in order (its index: the proposal order)
        # per proposal, its round: how many delivery points had brought answers before it (proposals of one
        # round were chosen on the same answers)
        self.rounds: list[int] = []
        self.proposed: dict[int, int] = {}  # candidate index -> order of its first proposal (measured or not)
        self._pending: dict[int, Config] = {}  # proposal order -> configuration, not answered yet
        self._answered: dict[int, float] = {}  # proposal order -> its answer
        self.events = 0  # delivery points passed
        self.informed = 0  # delivery points that brought answers: a proposal's round
        self.deliveries: list[tuple[int, int]] = []  # (delivery point, proposal order), in arrival order
        # what a strategy says about its own search beside the pick (``p_faster``: its estimate of the chance
        # that a configuration at least 5% faster than the pick remains unmeasured); empty if it says nothing
        self.notes: dict[str, Any] = {}

    # ---------------------------------------------------------------------------------------------- measuring
    @property
    def used(self) -> int:
        """Measurements spent: answered or still in flight."""
        return len(self.proposals)

    @property
    def capped(self) -> bool:
        """True where the budget asked for was more than the space holds (the whole space is measured)."""
        return self.asked > self.space_size

    @property
    def remaining(self) -> int:
        return self.budget - self.used

    @property
    def pending(self) -> int:
        """Proposals whose answer has not reached the strategy yet."""
        return len(self._pending)

    def config(self, i: int) -> Config:
        return dict(zip(self.names, (int(v) for v in self.X[i]), strict=True))

    def index_of(self, config: Mapping[str, int]) -> int | None:
        return self._index.get(tuple(int(config[n]) for n in self.names))

    def can_measure(self, config: Mapping[str, int]) -> bool:
        return self.space.is_valid(config) and self.workload.answerable(config)

    def measure(self, config: Mapping[str, int]) -> float:
        """Propose ``config`` for one measurement (``repeats`` runs) and spend one unit of budget.

        Returns its time where the answer is already in (always with ``answers.width`` 1), else NaN: its
        answer reaches ``measured`` at a later delivery point. Returns once fewer than ``answers.width``
        proposals wait for their answers."""
        if self.used >= self.budget:
            raise BudgetExhausted(f"budget of {self.budget} measurements is spent")
        cfg = {n: int(config[n]) for n in self.names}
        order = len(self.proposals)
        self.proposals.append(cfg)
        self.rounds.append(self.informed)
        i = self.index_of(cfg)
        if i is not None:
            self.proposed.setdefault(i, order)
            if self._group is not None:
                self._measured_groups.add(int(self._group[i]))
        self._pending[order] = cfg
        self.answers.submit(order, cfg, self.informed)
        self._deliver(block=lambda: len(self._pending) >= max(1, self.answers.width))
        return self._answered.get(order, float("nan"))

    def measure_index(self, i: int) -> float:
        return self.measure(self.config(int(i)))

    def settle(self) -> None:
        """Wait for every proposal's answer (a delivery point): what a strategy calls where it needs all of
        its measurements before it goes on (the end of a search; a model fitted once on a random phase)."""
        self._deliver(block=lambda: bool(self._pending))

    def _deliver(self, block: Callable[[], bool]) -> None:
        """One delivery point: the answers that are in join the measurements, waiting for more while
        ``block()`` (unless the answers of this point are a recording: a resumed search replays them)."""
        event = self.events
        self.events += 1
        before = len(self.history)
        for answer in self.answers.collect(event, block=False):
            self._apply(event, answer)
        while self._pending and block() and not self.answers.recorded(event):
            for answer in self.answers.collect(event, block=True):
                self._apply(event, answer)
        self.informed += len(self.history) > before

    def _apply(self, event: int, answer: Answer) -> None:
        cfg = self._pending.pop(answer.order)
        t = float(answer.time)
        self._answered[answer.order] = t
        self.deliveries.append((event, answer.order))
        self.history.append(Measurement(cfg, t, dict(answer.kernels)))
        i = self.index_of(cfg)
        if i is not None:  # a re-measured configuration: the mean of its measurements, the better estimate
            n = self._counts.get(i, 0)
            self.measured[i] = t if n == 0 else (self.measured[i] * n + t) / (n + 1)
            self._counts[i] = n + 1

    def unmeasured(self) -> np.ndarray:
        """Candidates not proposed yet, nor the same code as one proposed (see ``_group``)."""
        mask = np.ones(len(self.X), dtype=bool)
        mask[list(self.proposed)] = False
        if self._group is not None and self._measured_groups:
            mask &= ~np.isin(self._group, list(self._measured_groups))
        return np.flatnonzero(mask)

    def announce(self, indices: Sequence[int] | np.ndarray) -> None:
        """Tell the answers which candidates this strategy will propose next, in order (a generation it has
        chosen whole), so a workload that compiles per configuration compiles them while the first ones are
        measured (``Answers.ahead``, where the answers have it). Changes nothing a strategy sees."""
        ahead = getattr(self.answers, "ahead", None)
        if ahead is not None and len(indices) > 1:
            ahead([self.config(int(i)) for i in indices])

    def measure_random(self, n: int) -> None:
        """Measure ``n`` distinct, not yet proposed candidates drawn uniformly."""
        pool = self.unmeasured()
        n = min(n, len(pool), self.remaining)
        chosen = self.rng.choice(pool, size=n, replace=False)
        self.announce(chosen)
        for i in chosen:
            self.measure_index(int(i))

    def measure_ranked(self, scores: np.ndarray, n: int) -> None:
        """Measure the ``n`` not yet proposed candidates with the lowest ``scores`` (one per candidate)."""
        pool = self.unmeasured()
        n = min(n, len(pool), self.remaining)
        if n <= 0:
            return
        order = pool[np.argsort(scores[pool], kind="stable")[:n]]
        self.announce(order)
        for i in order:
            self.measure_index(int(i))

    # ------------------------------------------------------------------------------------------ training data
    def training_data(self, clip: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Features and log times of the measured candidates.

        A failed configuration counts as twice the slowest seen, so a model learns to avoid the region where
        launches fail instead of ignoring it. ``clip`` caps every time at ``clip`` times the best seen: a
        search only needs to rank the good configurations, and a model that spends its capacity explaining a
        70x slow-down (a wavefront-misaligned block on an AMD GPU) ranks the good ones worse.
        """
        self._deliver(block=lambda: not self.measured)
        idx = np.array(list(self.measured), dtype=int)
        t = np.array([self.measured[i] for i in idx])
        finite = np.isfinite(t)
        worst = np.log(t[finite].max()) + np.log(2) if finite.any() else 0.0
        y = np.where(finite, np.log(np.where(finite, t, 1.0)), worst)
        if clip is not None and len(y):
            y = np.minimum(y, y.min() + np.log(clip))
        return self.X[idx], y

    def best(self) -> Measurement:
        """The pick: the measured configuration with the lowest mean of its measurements (what a user would
        deploy; its true value is the score)."""
        if not self.history:
            return Measurement(self.space.default, float("inf"))
        means: dict[tuple[int, ...], list[float]] = {}
        for m in self.history:
            means.setdefault(tuple(m.config.values()), []).append(m.time)
        key = min(means, key=lambda k: float(np.mean(means[k])))
        chosen = next(m for m in self.history if tuple(m.config.values()) == key)
        return Measurement(chosen.config, float(np.mean(means[key])), chosen.kernels)
