"""A live search (``launchtune sweep SPEC --strategy NAME --budget N``): per GPU class, a strategy of
``launchtune.pipeline.strategies`` chooses what the class's workers measure.

The strategy runs here, in the sweep's process, through the same :class:`~pipeline.strategies.base.Session`
as a replay; only its answers differ (:class:`ClusterAnswers`): each proposal is one Dask task on a worker of
the class (``worker.measure_batch``, one shard ``shard-search-<order>.parquet`` with the search's columns), so
the proposals are in flight on every worker at once, and the strategy proposes again as soon as one answer is
back (``distributed.as_completed``), not in lock-step rounds. Which answers reached the strategy at which of
its delivery points is appended to ``search/<class>.jsonl`` as they arrive.

Resume: the same command again runs the strategy from its seed; the journal's answers are replayed from the
shards at the delivery points where they first arrived (:class:`ResumedAnswers`), so the strategy proposes
exactly what it proposed before, and once the journal ends it goes on live. A proposal whose shard is on disk
is answered from it, never measured twice; one lost with its worker is measured again (Dask retries its
task, or the rerun proposes it again).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from launchtune.kernels.space import Config, Inactive, Param, Space
from launchtune.kernels.workload import Check, Timing, Workload

from ..cluster.waits import timed_out
from ..errors import UserError
from ..learn.models import one_thread
from ..store.datasets import Dataset, device_features
from ..store.folder import SweepFolder
from ..store.journal import Journal
from ..store.schema import OBJECTIVE_COLUMN, kernel_column, kernel_params, objective_of
from ..store.spec import SweepSpec
from ..store.workloads import workload_class
from ..strategies import get_strategy
from ..strategies.base import POOL_LIMIT, Answer, Session, StrategyError
from ..strategies.kernel_tuner_baseline import PREFIX as KT_PREFIX
from .priors import aligned, constants_of
from .remeasure import pick_task
from .worker import compile_task, measure_batch, search_plan_task

Log = Callable[[str], None]
SAMPLER = "search"  # the ``sampler`` of a search's rows


def batch_name(order: int) -> str:
    """The shard of proposal ``order``: one proposal, one task, one shard."""
    return f"search-{order:05d}"


class ClassSpace(Workload):
    """A class's space and candidate pool as the sweep's process sees them (from ``search_plan_task``, run
    on a worker of the class): the space without its device constraints, since the pool holds only
    configurations that satisfy them. Measuring is the workers' job, so ``run`` refuses."""

    name = "search"
    size: tuple[int, ...] = ()

    def __init__(self, plan: Mapping[str, Any]) -> None:
        self.case = str((plan.get("device") or {}).get("gpu_class", ""))
        params = list(plan["params"])
        self.params = params
        self._space = Space(
            tuple(Param(p, tuple(int(v) for v in plan["values"][p])) for p in params),
            {p: int(plan["default"][p]) for p in params},
            name="search",
            inactive=tuple(
                Inactive(when, tuple(int(v) for v in values), tuple(unused))
                for when, values, unused in plan.get("inactive") or []
            ),
        )
        self.pool = np.asarray(plan["pool"], dtype=np.int64).reshape(-1, len(params))
        self._keys = {tuple(row) for row in self.pool.tolist()}

    def space(self) -> Space:
        return self._space

    def candidates(self) -> list[Config]:
        return [dict(zip(self.params, row, strict=True)) for row in self.pool.tolist()]

    def answerable(self, config: Mapping[str, int]) -> bool:
        return tuple(int(config[p]) for p in self.params) in self._keys

    def run(self, config: Mapping[str, int], repeats: int) -> Timing:
        raise RuntimeError("a live search measures on the cluster's workers, not in the sweep's process")

    def check(self, config: Mapping[str, int]) -> Check:
        return Check(self.answerable(config), "" if self.answerable(config) else "not in the pool")

    def describe(self) -> dict[str, Any]:
        return {"workload": self.name}


# ------------------------------------------------------------------------------------------------ answers
def _to_answer(d: Mapping[str, Any]) -> Answer:
    t = d.get("total_ms")
    return Answer(int(d["sample_id"]), float("inf") if t is None else float(t), dict(d.get("kernels") or {}))


class ClusterAnswers:
    """Proposals measured on the class's workers, as many in flight as the class has workers (``width``);
    answers collected as they complete (``distributed.as_completed``), each journaled as it reaches the
    strategy. ``stop`` (set by the sweep on an interrupt) ends a wait at once."""

    def __init__(
        self,
        client: Any,
        spec: SweepSpec,
        cls: str,
        plan: Mapping[str, Any],
        out: Path,
        width: int,
        journal: Journal,
        limit: float,
        stop: threading.Event | None = None,
    ) -> None:
        self.client, self.cls, self.out, self.width = client, cls, out, max(1, int(width))
        self.spec_d = spec.to_dict()
        self.strategy = spec.search.strategy if spec.search else ""
        self.plan = {
            "params": plan["params"],
            "kernels": plan["kernels"],
            "search": True,
            **{k: plan[k] for k in ("measures", "objective") if k in plan},
        }
        self.journal, self.limit = journal, limit
        self.stop = stop or threading.Event()
        # Dask's, made with the first proposal (it needs Dask's client, which an in-process run has not)
        self.completed: Any = None
        self.measured = 0  # proposals measured by this run (not answered from a shard already on disk)
        self.answered = 0  # answers that reached the strategy live in this run
        self.log: Log = lambda _: None
        self.every = max(1, (spec.search.budget if spec.search else 10) // 10)
        # a workload that compiles per configuration is told a generation's proposals ahead (``ahead``)
        made = workload_class(spec.workload)  # None for a module:factory: no compiles
        self.compiles = made is not None and made.compile_ahead is not Workload.compile_ahead
        self._compiling: list[Any] = []  # futures of compile tasks (Dask cancels a task whose future is gone)

    def ahead(self, configs: Sequence[Config]) -> None:
        """Start compiling ``configs`` on the class's workers while the first ones are measured."""
        if not self.compiles:
            return
        self._compiling = [f for f in self._compiling if not f.done()]
        self._compiling.append(
            self.client.submit(
                compile_task,
                self.spec_d,
                [dict(c) for c in configs],
                resources={self.cls: 1},
                pure=False,
                key=f"compile-{self.cls}-{time.time_ns()}",
            )
        )

    def task(self, order: int, config: Config, round: int) -> tuple[Any, ...]:
        """``measure_batch``'s arguments for proposal ``order``: one proposal, one shard."""
        batch = batch_name(order)
        return (
            self.spec_d,
            self.plan,
            self.cls,
            batch,
            [(order, SAMPLER, dict(config))],
            str(SweepFolder(self.out).shard_path(self.cls, batch)),
            str(self.out),
            {order: {"strategy": self.strategy, "proposal_round": round, "proposal_order": order}},
        )

    def submit(self, order: int, config: Config, round: int) -> None:
        future = self.client.submit(
            measure_batch,
            *self.task(order, config, round),
            resources={self.cls: 1},
            pure=False,
            retries=2,
            key=f"search-{self.cls}-{order}-{time.time_ns()}",
        )
        if self.completed is None:
            from distributed import as_completed  # Dask's path only: one local device searches without it

            self.completed = as_completed()
        self.completed.add(future)

    def collect(self, event: int, block: bool) -> list[Answer]:
        if block:
            self._wait()
        answers: list[Answer] = []
        for future in self.completed.next_batch(block=False) if self.completed.has_ready() else []:
            # a task that failed after Dask's retries raises here
            answers += self.take(future.result(), event)
        return answers

    def take(self, result: Mapping[str, Any], event: int) -> list[Answer]:
        """A measured proposal's answers, journaled as they reach the strategy at delivery point ``event``."""
        if "fatal" in result:  # the shard folder is not writable: every later proposal fails alike
            raise UserError(f"{result['fatal']}; fix the folder and rerun to go on with the search")
        self.measured += bool(result.get("measured"))
        answers = []
        for d in result["answers"]:
            answers.append(_to_answer(d))
            self.journal.append(event, int(d["sample_id"]))
            self.answered += 1
            if self.answered % self.every == 0:
                self.log(f"search {self.cls}: {self.answered} answers in")
        return answers

    def _wait(self) -> None:
        deadline = time.monotonic() + self.limit
        condition = self.completed.thread_condition
        while not self.completed.has_ready():
            if self.stop.is_set():
                raise KeyboardInterrupt
            if time.monotonic() > deadline:
                raise timed_out(f"search {self.cls}: no measurement came back", self.limit)
            with condition:
                condition.wait(timeout=0.1)

    def recorded(self, event: int) -> bool:
        return False


class InProcessAnswers(ClusterAnswers):
    """One local device, in this process (``cluster.inline``): each proposal measured as it is submitted,
    into its own shard (written atomically), its answer journaled when it reaches the strategy; the
    sequential session's order, as one Dask worker gave it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.width = 1
        self._ready: list[Mapping[str, Any]] = []

    def submit(self, order: int, config: Config, round: int) -> None:
        self._ready.append(measure_batch(*self.task(order, config, round)))

    def collect(self, event: int, block: bool) -> list[Answer]:
        ready, self._ready = self._ready, []
        return [a for result in ready for a in self.take(result, event)]


class ResumedAnswers:
    """A resumed search: the journal's answers replayed from the shards at the delivery points where they
    first arrived, then ``live``. A proposal the journal answers must be the recorded one (else the strategy
    or its data changed, and its recording says nothing about this run)."""

    def __init__(self, live: ClusterAnswers, entries: Sequence[tuple[int, int]], on_disk: dict[int, Any]):
        self.live = live
        self.width = live.width
        self.at: dict[int, list[int]] = {}
        for event, order in entries:
            self.at.setdefault(event, []).append(order)
        self.logged = {order for _, order in entries}
        self.last = max(self.at, default=-1)
        self.on_disk = on_disk
        self.replayed = 0

    def submit(self, order: int, config: Config, round: int) -> None:
        if order not in self.logged:
            self.live.submit(order, config, round)
            return
        recorded = self.on_disk[order][0]
        if recorded != dict(config):
            raise UserError(
                f"search {self.live.cls}: proposal {order} is not the one recorded in "
                f"{self.live.journal.path} (the strategy, its options or the data changed since); "
                "rerun with --force to start afresh"
            )

    def collect(self, event: int, block: bool) -> list[Answer]:
        if event > self.last:
            return self.live.collect(event, block)
        orders = self.at.get(event, [])
        self.replayed += len(orders)
        return [self.on_disk[o][1] for o in orders]

    def recorded(self, event: int) -> bool:
        return event <= self.last

    def ahead(self, configs: Sequence[Config]) -> None:
        ahead = getattr(self.live, "ahead", None)  # optional (``Answers``)
        if ahead is not None:
            ahead(configs)


def _recorded_answers(
    folder: SweepFolder, cls: str, plan: Mapping[str, Any]
) -> dict[int, tuple[Config, Answer]]:
    """Every proposal answered by a search shard of ``cls`` on disk: its configuration and answer."""
    params, kernels = list(plan["params"]), list(plan["kernels"])
    objective = plan.get("measures") is not None  # rows rank by the objective's cost (schema.plan_schema)
    cost = OBJECTIVE_COLUMN if objective else "total_ms"
    found: dict[int, tuple[Config, Answer]] = {}
    for path in sorted(folder.shard_dir(cls).glob("shard-search-*.parquet")):
        try:
            rows = pq.read_table(
                path,
                columns=["sample_id", "status", *{"total_ms", cost}, *params, *map(kernel_column, kernels)],
            )
        except Exception:  # noqa: BLE001  (pyarrow raises several types; an unreadable shard is re-measured)
            continue
        for row in rows.to_pylist():
            ok = row["status"] == "ok" and row[cost] is not None
            answer = {
                "sample_id": row["sample_id"],
                "total_ms": row[cost] if ok else None,
                "kernels": {
                    k: row[kernel_column(k)]
                    for k in kernels
                    if ok and not objective and row[kernel_column(k)] is not None
                },
            }
            found[int(row["sample_id"])] = ({p: int(row[p]) for p in params}, _to_answer(answer))
    return found


def resumable(journal: Journal, on_disk: Mapping[int, Any]) -> list[tuple[int, int]]:
    """The journal up to its first answer whose shard is gone (after it, nothing is known to be on disk)."""
    entries = []
    for event, order in journal.read():
        if order not in on_disk:
            break
        entries.append((event, order))
    return entries


# ------------------------------------------------------------------------------------------------- search
@dataclass
class ClassSearch:
    """What one class's search did: its session (pick, history), the answers replayed and measured."""

    cls: str
    session: Session
    replayed: int
    measured: int
    seconds: float
    width: int


def device_facts(plan: Mapping[str, Any]) -> dict[str, Any]:
    """What a strategy may know of the card (``transfer``: spec-sheet figures by its name)."""
    device = dict(plan.get("device") or {})
    name = str(device.get("device_name", ""))
    return {"device_name": name, "features": device_features(name), **{"gpu_class": device.get("gpu_class")}}


def search_class(
    client: Any,
    spec: SweepSpec,
    cls: str,
    plan: Mapping[str, Any],
    out: Path,
    width: int,
    prior: Sequence[Dataset],
    log: Log,
    limit: float,
    stop: threading.Event | None = None,
) -> ClassSearch:
    """Run ``spec.search`` on class ``cls`` to its budget (resuming from the journal and shards)."""
    assert spec.search is not None
    params = list(plan["params"])
    prior = aligned(prior, constants_of(plan["values"]))
    kernels = {
        k: ps
        for k, ps in kernel_params(params).items()
        if k in set(plan["kernels"]) and any("." in p for p in ps)
    }

    def session_of(answers: Any) -> Session:
        assert spec.search is not None
        return Session(
            ClassSpace(plan),
            spec.search.budget,
            spec.seed,
            repeats=spec.repeats,
            prior=prior,
            kernels=kernels,
            device=device_facts(plan),
            answers=answers,
        )

    if spec.search.strategy.startswith(KT_PREFIX):  # Kernel Tuner's own loop, on one worker of the class
        from .kernel_tuner_live import kernel_tuner_search

        kt_session, cached, measured, took = kernel_tuner_search(
            client, spec, cls, plan, out, session_of, log, limit
        )
        return ClassSearch(cls, kt_session, cached, measured, took, 1)
    folder = SweepFolder(out)
    journal = Journal(folder.search_journal(cls))
    on_disk = _recorded_answers(folder, cls, plan)
    entries = resumable(journal, on_disk)
    if len(entries) != len(journal.read()) or journal.torn:  # a torn or foreign tail goes
        if journal.torn:
            log(
                f"search {cls}: {journal.path}: line {journal.torn_at} is not an answer (torn, or not "
                "written by a search); it and the lines after it are left out of the replay"
            )
        journal.rewrite(entries)
    kind = InProcessAnswers if getattr(client, "in_process", False) else ClusterAnswers
    live = kind(client, spec, cls, plan, out, width, journal, limit, stop)
    live.log = log
    answers = ResumedAnswers(live, entries, on_disk)
    session = session_of(answers)
    if entries:
        log(f"search {cls}: {len(entries)} answers recorded, replayed to the strategy from the shards")
    t0 = time.perf_counter()
    try:
        get_strategy(spec.search.strategy)(session)
        session.settle()
    except StrategyError as exc:
        raise UserError(f"--strategy {spec.search.strategy}: {exc}") from None
    finally:
        journal.close()
    seconds = time.perf_counter() - t0
    best = session.best()
    sure = session.notes.get("p_faster")
    log(
        f"search {cls}: {session.used} of {spec.search.budget} measurements ({answers.replayed} replayed "
        f"from the shards, {live.measured} measured now), best {objective_of(plan).show(best.time)}"
        + (f"; chance a 5% faster configuration is unmeasured: {sure:.2f}" if sure is not None else "")
    )
    return ClassSearch(cls, session, answers.replayed, live.measured, seconds, live.width)


def top_picks(session: Session, k: int) -> list[tuple[Config, float]]:
    """The ``k`` best measured configurations (mean of their measurements), best first: the pick and the
    runners-up re-measured beside it."""
    means: dict[tuple[int, ...], list[float]] = {}
    configs: dict[tuple[int, ...], Config] = {}
    for m in session.history:
        key = tuple(m.config.values())
        means.setdefault(key, []).append(m.time)
        configs[key] = m.config
    # ties go to the first measured, as Session.best() (the pick of a replay) breaks them
    ranked = sorted(
        (float(np.mean(v)), n, key) for n, (key, v) in enumerate(means.items()) if np.isfinite(np.mean(v))
    )
    return [(configs[key], t) for t, _, key in ranked[: max(1, k)]]


def remeasure_search_pick(client: Any, spec: SweepSpec, found: ClassSearch, limit: float) -> dict[str, Any]:
    """The search's pick (and its runners-up, ``validate.top_k``) against the default on a worker of the
    class, in ``validation.json``'s shape, with the search's facts under ``search``."""
    from ..cluster.waits import result

    assert spec.search is not None
    picks = top_picks(found.session, spec.validate.top_k)
    future = client.submit(
        pick_task,
        spec.to_dict(),
        [c for c, _ in picks],
        spec.validate.repeats,
        spec.seed + 1,
        spec.validate.rounds,
        resources={found.cls: 1},
        pure=False,
        key=f"search-pick-{found.cls}-{time.time_ns()}",
    )
    answer = result(future, f"the re-measurement of class {found.cls}'s search pick", limit)
    searched = {tuple(c.values()): t for c, t in picks}
    for c in answer["candidates"] + answer["rejected"]:
        c["predicted_ms"] = searched.get(tuple(c["config"].values()))
    answer.update(
        model=f"search:{spec.search.strategy}",
        repeats=spec.validate.repeats,
        search={
            "strategy": spec.search.strategy,
            "budget": spec.search.budget,
            "measured": found.session.used,
            "workers": found.width,
            "seed": spec.seed,
            "best_ms": picks[0][1] if picks else None,
            # the strategy's estimate that a configuration 5% faster than its pick remains unmeasured
            "p_faster": found.session.notes.get("p_faster"),
            "pick": picks[0][0] if picks else None,
            "seconds": round(found.seconds, 2),
            "replayed": found.replayed,
            "measured_now": found.measured,
            "prior": list(spec.search.prior),
        },
    )
    return answer


def run_searches(
    client: Any,
    spec: SweepSpec,
    plans: Mapping[str, Mapping[str, Any]],
    out: Path,
    widths: Mapping[str, int],
    prior: Sequence[Dataset],
    log: Log,
    limit: float,
) -> dict[str, ClassSearch]:
    """Every class's search at once: one class in this thread; several in one thread each (each waits on its
    own workers' answers), stopped together on an interrupt."""

    def search(cls: str, plan: Mapping[str, Any], stop: threading.Event | None = None) -> ClassSearch:
        # a class's own rows in a prior sweep folder are not its prior
        others = [d for d in prior if d.name != cls]
        return search_class(client, spec, cls, plan, out, widths[cls], others, log, limit, stop)

    # the estimators' numbers must not depend on the machine's thread count (one BLAS thread, set for the
    # whole process: threadpoolctl's limits are not per thread)
    with one_thread():
        if len(plans) == 1:
            ((cls, plan),) = plans.items()
            return {cls: search(cls, plan)}
        return _in_threads(search, plans)


def _in_threads(
    search: Callable[[str, Mapping[str, Any], threading.Event], ClassSearch],
    plans: Mapping[str, Mapping[str, Any]],
) -> dict[str, ClassSearch]:
    """``search`` of each class in a thread of its own; the first failure, or an interrupt, stops them all."""
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

    stop = threading.Event()
    with ThreadPoolExecutor(len(plans)) as pool:
        futures = {cls: pool.submit(search, cls, plan, stop) for cls, plan in plans.items()}
        try:
            pending = set(futures.values())
            while pending:
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
                if any(f.exception() for f in done):
                    break
        except BaseException:
            stop.set()
            raise
        stop.set()
        return {cls: f.result() for cls, f in futures.items()}


def search_pool_plan(
    client: Any, spec: SweepSpec, cls: str, limit: float, pool_limit: int | None = None
) -> dict[str, Any]:
    """A class's search plan, on one of its workers (``worker.search_plan_task``; a pool of at most
    ``pool_limit`` candidates, default ``strategies.base.POOL_LIMIT``)."""
    from ..cluster.waits import result

    future = client.submit(
        search_plan_task,
        spec.to_dict(),
        spec.seed,
        pool_limit or POOL_LIMIT,
        resources={cls: 1},
        pure=False,
        key=f"search-plan-{cls}-{time.time_ns()}",
    )
    plan = result(future, f"the search plan of class {cls}", limit)
    assert spec.search is not None
    if spec.search.budget > len(plan["pool"]):
        raise UserError(
            f"--budget: {spec.search.budget} measurements is more than class {cls}'s space holds "
            f"({len(plan['pool'])} configurations)"
        )
    return plan
