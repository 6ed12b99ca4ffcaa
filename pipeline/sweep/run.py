"""The sweep graph: plan on each class's worker -> one task per (class, batch) writing a shard -> merge ->
train -> re-measure the predicted best and the default on each class -> report.

Batching lives in :mod:`launchtune.pipeline.store.batching`, measuring the batches on the cluster in
:mod:`launchtune.pipeline.sweep.measure`.

Finished shards are skipped on rerun, so an interrupted sweep resumes where it stopped; ``force`` with classes
redoes only those partitions. Tasks carry ``resources={class: 1}`` so a class's batches run only on its
workers.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from launchtune.kernels.atomic import atomic_path
from launchtune.kernels.workload import SEED_MAX

from ..cluster import ClusterHandle, open_cluster
from ..cluster.waits import result, wait_limit
from ..errors import UserError
from ..learn.parallel import pool_ends_with_block
from ..learn.pick import incumbents, known_failures
from ..results.report import build_report, remeasure_line
from ..store.batching import auto_batch_size
from ..store.checksums import EditedFile
from ..store.folder import PLANNED_WITH, Plan, SweepFolder, as_plan, data_hash, plan_facts
from ..store.lock import sweep_lock
from ..store.ownership import claim
from ..store.shards import load_merged, merge
from ..store.spec import SweepSpec
from .measure import (
    measure_batches,
    measure_in_process,
    warm_workers,
    workers_by_class,
)
from .plan import SweepPlan
from .remeasure import remeasure_task
from .worker import plan_task

logger = logging.getLogger(__name__)

# Each class's plan: a random sweep's Plan, a search's plan with its pool (search.search_pool_plan)
Plans = Mapping[str, Mapping[str, Any]]
Log = Callable[[str], None]


def check_previous(out: Path, spec: SweepSpec, force: bool, classes: Sequence[str] | None, log: Log) -> None:
    """A folder holds one sweep: a rerun must plan the same samples, or start afresh with --force."""
    folder = SweepFolder(out)
    old = folder.planning_key()
    if old is None:
        return
    new = spec.planning_key()
    differs = [k for k in new if old.get(k) != new[k]]
    if not differs:
        return
    if force and not classes:
        log(f"--force: {out} was planned with other {', '.join(differs)}; starting it afresh")
        folder.clear("sweep")
        return
    k = differs[0]
    raise UserError(
        f"{out}: this folder holds a sweep planned with {k}={old.get(k)!r}, not {new[k]!r}; "
        "use another --out, "
        "or --force (without --gpu-class) to start it afresh"
    )


def start_afresh_if_edited(out: Path, force: bool, classes: Sequence[str] | None, log: Log) -> None:
    """A ``sweep.json`` edited since the sweep wrote it is refused (:mod:`pipeline.store.checksums`), except
    with ``--force`` (without ``--gpu-class``), which starts the folder afresh as for another plan."""
    folder = SweepFolder(out)
    try:
        folder.read_meta()
    except EditedFile as exc:
        if not force or classes:
            raise
        log(f"--force: {str(exc).split(';', 1)[0]}; starting it afresh")
        folder.clear("sweep")


def keep_batch_size(spec: SweepSpec, previous: dict[str, Any] | None, fresh: bool, log: Log) -> SweepSpec:
    """``batch_size: auto`` in a folder planned before: the batch size chosen then (batch and shard names
    must not move between runs); a fresh start (``fresh``) chooses again."""
    old = (previous or {}).get("batch_size")
    if spec.batch_size != "auto" or fresh or not isinstance(old, int):
        return spec
    log(f"batch_size auto: {old}, as chosen when {spec.name} was planned")
    return replace(spec, batch_size=old)


def plan_class(
    client, spec: SweepSpec, cls: str, out: Path, replan: bool, limit: float | None = None
) -> Plan:
    """Class ``cls``'s plan (its configurations, space and device facts), drawn on a worker of that class and
    written to ``out``'s ``plan/``; the folder's plan as it is unless ``replan``. The answer is waited for at
    most ``limit`` seconds (``launchtune.pipeline.cluster.waits``; None: the local cluster's default)."""
    limit = limit or wait_limit("local")
    folder = SweepFolder(out)
    plan = None if replan else folder.read_plan(cls)
    # as the plan's JSON holds it (tuples read back as lists)
    wanted = json.loads(
        json.dumps({k: v for k, v in spec.to_dict().items() if k in PLANNED_WITH}, default=str)
    )
    if plan is not None:
        old = plan.get("planned_with")
        if old is not None and old != wanted:
            k = next(k for k in sorted(wanted.keys() | old.keys()) if old.get(k) != wanted.get(k))
            raise UserError(
                f"{folder.plan_path(cls)}: planned with {k}={old.get(k)!r}, not {wanted.get(k)!r}; use "
                "another --out, or --force to plan afresh"
            )
        if "configs" in plan:  # a committed plan is slimmed to its facts; the seeded draw below redoes it
            return plan
    future = client.submit(
        plan_task,
        spec.to_dict(),
        list(spec.samplers),
        spec.samples,
        spec.seed,
        resources={cls: 1},
        pure=False,
        key=f"plan-{cls}-{time.time_ns()}",
    )
    drawn: Plan = result(future, f"the plan of class {cls}", limit)  # (worker.plan_task)
    drawn["planned_with"] = wanted
    folder.write_plan(cls, drawn)
    return drawn


def remeasure_picks(
    client,
    spec: SweepSpec,
    plans: Plans,
    trained: dict,
    metrics: dict,
    out: Path,
    log: Log,
    limit: float | None = None,
    local: bool = False,
) -> dict[str, Any]:
    """Each class's predicted best against its default, measured on a worker of that class (``client``
    submits ``remeasure_task`` with the class as resource): ``validation.json``'s entries; each class's answer
    waited for at most ``limit`` seconds (``pipeline.cluster.waits``; None: the local cluster's default), and,
    on the ``local`` cluster (whose dead workers do not come back), no longer than ``gone_limit()`` (30 s,
    ``$LAUNCHTUNE_GONE_S``) without a worker of the class."""
    limit = limit or wait_limit("local")
    validation: dict[str, Any] = {}
    futures = {}
    merged = load_merged(out)  # its invalid and failed rows are never picked (launchtune.pipeline.learn.pick)
    for cls, plan in plans.items():
        entry = metrics["groups"].get(cls, {})
        if cls not in trained or "search_model" not in entry:
            continue
        name = entry["search_model"]
        models = trained[cls]
        extra = [plan["default"]]
        if "additive" in models:
            extra.append(
                {**plan["default"], **models["additive"].best_per_kernel(plan["params"], plan["values"])}
            )
        futures[cls] = (
            name,
            client.submit(
                remeasure_task,
                spec.to_dict(),
                models[name],
                plan["params"],
                extra,
                spec.validate.pool,
                spec.validate.top_k,
                spec.validate.repeats,
                (spec.seed + 1) % (SEED_MAX + 1),  # within every library's seed range
                spec.validate.rounds,
                known_failures(merged, cls, plan["params"]),
                incumbents(merged, cls, plan["params"], spec.validate.incumbents),
                resources={cls: 1},
                pure=False,
                key=f"remeasure-{cls}-{time.time_ns()}",
            ),
        )
    for cls, (name, future) in futures.items():
        alive = (lambda c=cls: workers_by_class(client, [c])[c] > 0) if local else None
        answer = result(future, f"the re-measurement of class {cls}'s predicted best", limit, alive)
        answer.update(model=name, repeats=spec.validate.repeats)
        validation[cls] = answer
        if not answer["candidates"]:
            log(f"re-measured {cls}: none of the {len(answer['rejected'])} best-ranked candidates ran")
            continue
        top, default = answer["candidates"][0], answer["default"]
        line = remeasure_line(
            top, default, answer.get("comparison"), answer["backend"], answer.get("objective")
        )
        skipped = f" ({len(answer['rejected'])} unrunnable candidates skipped)" if answer["rejected"] else ""
        log(f"re-measured {cls}: {line}{skipped}")
    return validation


def _follow_up(spec: SweepSpec, out: Path, plans: Plans) -> tuple[bool, bool]:
    """What follows the measuring this time: (train, re-measure). Each only where the spec asks for it
    (``SweepSpec.trains``, ``remeasures``), and only where the merged data changed since it was last done or a
    class was never re-measured; models are trained again whenever the picks their ranking chose are."""
    folder = SweepFolder(out)
    try:
        metrics, validation = folder.read_metrics(), folder.read_validation()
    except UserError:
        metrics, validation = None, None
    current = data_hash(load_merged(out))
    trained = metrics is not None and metrics.get("data_hash") == current
    remeasured = validation is not None and all(
        c in validation and validation[c].get("data_hash", (metrics or {}).get("data_hash")) == current
        for c in plans
    )
    remeasure = spec.remeasures() and not remeasured
    return spec.trains() and (not trained or remeasure), remeasure


@contextmanager
def performance_report(path: Path, log: Log) -> Iterator[None]:
    """Dask's performance report of what runs inside (task stream, profiles, worker use), saved as one HTML
    file beside the results; skipped with a note where bokeh, which draws it, is missing."""
    try:
        import bokeh  # noqa: F401  (distributed renders the report with it)
        from distributed import performance_report as dask_report
    except ImportError:
        log("no Dask performance report: bokeh is not installed")
        yield
        return
    # The report is a by-product: failing to write it (a full or read-only disk) is a note, and it must not
    # replace the error that stopped the sweep (the shard write's one line) with a traceback of its own.
    stack = ExitStack()
    try:
        tmp = stack.enter_context(atomic_path(path))
        stack.enter_context(dask_report(filename=str(tmp)))
    except OSError as exc:
        stack.close()
        log(f"no Dask performance report: {path}: {exc.strerror or exc}")
        yield
        return
    try:
        yield
    except BaseException as exc:
        try:
            stack.__exit__(type(exc), exc, exc.__traceback__)
        except OSError as write:
            log(f"no Dask performance report: {path}: {write.strerror or write}")
        raise
    try:
        stack.close()
    except OSError as exc:
        log(f"no Dask performance report: {path}: {exc.strerror or exc}")


def run_plan(plan: SweepPlan, log: Log = logger.info) -> dict[str, Any]:
    """Everything ``launchtune sweep`` and the Python API do with a checked plan (``sweep.plan.plan_sweep``),
    in order, under the folder's lock; returns the report. With ``spec.search`` a strategy chooses what is
    measured (``pipeline.sweep.search``), else the seeded sample of each class's plan is; everything around
    the measuring (the folder's checks, meta, timing, merge, training, re-measuring, the report) is the same
    flow for both (:func:`_run`)."""
    with sweep_lock(plan.out, log), pool_ends_with_block():
        return _run(plan, log)


@dataclass
class _Run:
    """One run of a plan on an open cluster: what the proposers (:class:`_Sampled`, :class:`_Searched`)
    share. ``plan`` is replaced where the run settles a value (``batch_size: auto``)."""

    plan: SweepPlan
    handle: ClusterHandle
    chosen: list[str]
    limit: float
    log: Log

    @property
    def spec(self) -> SweepSpec:
        return self.plan.spec

    @property
    def folder(self) -> SweepFolder:
        return SweepFolder(self.plan.out)

    def redo_partition(self, cls: str) -> bool:
        """``--force --gpu-class``: this class's shards are measured afresh, the other classes' kept."""
        return bool(self.plan.force and self.plan.classes and cls in self.plan.classes)


class _Sampled:
    """A random sweep: each class's seeded sample (and grids) planned on a worker of the class, measured in
    batches (``sweep.measure``), the models' predicted best re-measured against the default."""

    def plans(self, run: _Run) -> Plans:
        plans = {}
        for cls in run.chosen:
            redo = run.plan.force and (not run.plan.classes or cls in run.plan.classes)
            if run.redo_partition(cls):
                shutil.rmtree(run.folder.shard_dir(cls), ignore_errors=True)
            plans[cls] = plan_class(
                run.handle.client, run.spec, cls, run.plan.out, replan=redo, limit=run.limit
            )
            run.log(
                f"plan {cls}: {len(plans[cls]['configs'])} configurations "
                f"on {plans[cls]['device']['device_name']}"
            )
        if run.spec.batch_size == "auto":
            size = auto_batch_size(plans, workers_by_class(run.handle.client, run.chosen))
            run.plan = replace(run.plan, spec=replace(run.spec, batch_size=size))
            run.log(f"batch_size auto: {size} (kept for this folder's reruns)")
        return plans

    def measure(self, run: _Run, plans: Plans) -> dict[str, Any] | None:
        """``timing.json``'s record of the measuring; None where nothing was left to measure."""
        local = run.handle.kind == "local"
        if run.handle.kind == "inline":
            timing = measure_in_process(run.spec, plans, run.plan.out, run.log, run.plan.max_minutes)
            return _measured(run, timing)
        with performance_report(run.folder.performance_report, run.log):
            timing = measure_batches(
                run.handle.client,
                run.spec,
                plans,
                run.plan.out,
                run.log,
                run.plan.max_minutes,
                local,
                run.limit,
            )
        return _measured(run, timing)

    def remeasure(self, run: _Run, plans: Plans, trained: dict | None) -> dict[str, Any]:
        if trained is None:  # no models: the fastest rows measured are the pick and its runners-up
            return _remeasure_rows(run, plans)
        return remeasure_picks(
            run.handle.client,
            run.spec,
            plans,
            trained["models"],
            trained["metrics"],
            run.plan.out,
            run.log,
            run.limit,
            local=run.handle.kind == "local",
        )


def _measured(run: _Run, timing: dict[str, Any]) -> dict[str, Any] | None:
    if timing["batches"]:
        run.log(
            f"measured {timing['rows']} configurations in {timing['seconds']} s "
            f"({timing['samples_per_minute']} per minute)"
        )
    return timing if timing["batches_to_measure"] else None


class _Searched:
    """A search: per class, a strategy proposes what the class's workers measure (``sweep.search``); its
    pick (and runners-up) re-measured against the default."""

    def __init__(self) -> None:
        self.found: dict[str, Any] = {}

    def plans(self, run: _Run) -> Plans:
        from .priors import check_params, constants_of
        from .search import search_pool_plan

        spec, folder = run.spec, run.folder
        assert spec.search is not None
        plans = {}
        for cls in run.chosen:
            if run.redo_partition(cls):
                shutil.rmtree(folder.shard_dir(cls), ignore_errors=True)
                folder.search_journal(cls).unlink(missing_ok=True)
            plan = search_pool_plan(run.handle.client, spec, cls, run.limit)
            check_params(run.plan.prior, plan["params"], "--prior", constants_of(plan["values"]))
            plans[cls] = plan
            record = as_plan(plan)  # the pool stays in memory
            record["n_configs"] = len(plan["pool"])
            record["search"] = spec.to_dict()["search"]
            folder.write_plan(cls, record)
            run.log(
                f"search {cls}: {spec.search.strategy}, {spec.search.budget} measurements among "
                f"{len(plan['pool'])} configurations on {plan['device']['device_name']}"
            )
        return plans

    def measure(self, run: _Run, plans: Plans) -> dict[str, Any] | None:
        from .search import run_searches

        client = run.handle.client
        widths = workers_by_class(client, run.chosen)
        if run.handle.kind == "local":
            warm_workers(client, run.spec.to_dict(), run.chosen, run.log, timeout=min(300.0, run.limit))
        t0 = time.perf_counter()
        self.found = run_searches(
            client, run.spec, plans, run.plan.out, widths, run.plan.prior, run.log, run.limit
        )
        seconds = time.perf_counter() - t0
        measured = sum(f.measured for f in self.found.values())
        if not measured:
            return None
        return {
            "rows": measured,
            "seconds": round(seconds, 2),
            "workers": sum(widths.values()),
            "samples_per_minute": round(60 * measured / seconds, 2) if seconds > 0 else None,
            "search": {
                c: {
                    "workers": f.width,
                    "measured": f.measured,
                    "replayed": f.replayed,
                    "seconds": round(f.seconds, 2),
                }
                for c, f in self.found.items()
            },
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
        }

    def remeasure(self, run: _Run, plans: Plans, trained: dict | None) -> dict[str, Any]:
        from .search import remeasure_search_pick

        answers = {}
        for cls, f in self.found.items():
            answer = remeasure_search_pick(run.handle.client, run.spec, f, run.limit)
            answers[cls] = answer
            if answer["candidates"]:
                line = remeasure_line(
                    answer["candidates"][0],
                    answer["default"],
                    answer.get("comparison"),
                    answer["backend"],
                    answer.get("objective"),
                )
                run.log(f"re-measured {cls}'s search pick: {line}")
            else:
                run.log(
                    f"re-measured {cls}: none of the search's {len(answer['rejected'])} best configurations "
                    "ran again"
                )
        return answers


def _remeasure_rows(run: _Run, plans: Plans) -> dict[str, Any]:
    """A sweep without models: each class's ``validate.top_k`` fastest rows against the default, as a
    search's pick is (``remeasure.pick_task``)."""
    from .remeasure import pick_task

    spec, merged, answers = run.spec, load_merged(run.plan.out), {}
    for cls, plan in plans.items():
        picks = incumbents(merged, cls, plan["params"], spec.validate.top_k)
        future = run.handle.client.submit(
            pick_task,
            spec.to_dict(),
            picks,
            spec.validate.repeats,
            (spec.seed + 1) % (SEED_MAX + 1),
            spec.validate.rounds,
            resources={cls: 1},
            pure=False,
            key=f"remeasure-rows-{cls}-{time.time_ns()}",
        )
        answer = result(future, f"the re-measurement of class {cls}'s fastest rows", run.limit)
        answer.update(model="recorded", repeats=spec.validate.repeats)
        answers[cls] = answer
        if answer["candidates"]:
            top = answer["candidates"][0]
            line = remeasure_line(
                top, answer["default"], answer.get("comparison"), answer["backend"], answer.get("objective")
            )
            run.log(f"re-measured {cls}'s fastest row: {line}")
    return answers


def _models_and_picks(run: _Run, proposer: _Sampled | _Searched, plans: Plans) -> None:
    """What follows the measuring, where the spec asks for it and the data changed: models trained, the pick
    re-measured (``_follow_up``)."""
    spec, out, log = run.spec, run.plan.out, run.log
    train, remeasure = _follow_up(spec, out, plans)
    if not (spec.trains() or spec.remeasures()):
        return
    if not (train or remeasure):
        log("nothing new since the last training: models and re-measurements kept")
        return
    if train:  # scikit-learn's import (about a second) only where models are trained
        from ..learn.train import train_sweep

        trained = train_sweep(out, log)
    else:
        trained = None
    if remeasure:
        current = data_hash(load_merged(out))
        answers = proposer.remeasure(run, plans, trained if spec.trains() else None)
        validation = run.folder.read_validation() or {}
        validation.update({c: {**a, "data_hash": current} for c, a in answers.items()})
        run.folder.write_validation(validation)


@contextmanager
def _cluster(plan: SweepPlan, wanted: list[str] | None, log: Log) -> Iterator[ClusterHandle]:
    """Where the plan is measured. One device on this machine (one GPU, or the CPU with one worker): in this
    process (``cluster.inline``), since a local Dask cluster with TLS took seconds to start and gives one
    worker nothing. Several GPUs, SLURM and a caller's own Dask cluster: Dask (``cluster.open_cluster``)."""
    from ..cluster.inline import one_local_worker, open_inline
    from .worker import name_this_worker

    worker = one_local_worker(plan.workers_per_class) if plan.cluster == "local" else None
    if worker is None:
        with open_cluster(
            plan.cluster, wanted, plan.workers_per_class, SweepFolder(plan.out).dask_dir, log
        ) as h:
            yield h
        return
    with open_inline(worker, wanted, log) as handle, name_this_worker(str(worker["name"])):
        yield handle


def _prepare(plan: SweepPlan, log: Log) -> SweepPlan:
    """The folder's checks before any cluster starts: it is a sweep's (or new), unedited, planned alike (or
    ``--force`` starts it afresh); ``batch_size: auto`` as chosen when it was planned."""
    out, classes, force = plan.out, plan.classes, plan.force
    folder = SweepFolder(out)
    claim(out, "sweep", "--out")  # a new or empty folder, or a sweep's: nothing else is replaced
    start_afresh_if_edited(out, force, classes, log)
    spec = keep_batch_size(plan.spec, folder.planning_key(), force and not classes, log)
    check_previous(out, spec, force, classes, log)
    return replace(plan, spec=spec)


def _write_meta(folder: SweepFolder, spec: SweepSpec, plans: Plans) -> None:
    first = next(iter(plans.values()))
    folder.write_meta(
        {
            "spec": spec.to_dict(),
            "planning_key": spec.planning_key(),
            "plan": plan_facts(first),
            "updated": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    )


def _run(plan: SweepPlan, log: Log) -> dict[str, Any]:
    plan = _prepare(plan, log)
    folder = SweepFolder(plan.out)
    wanted = list(plan.classes or plan.spec.gpu_classes or []) or None
    clock = _Clock(time.perf_counter(), datetime.now(UTC))
    with _cluster(plan, wanted, log) as handle:
        chosen = wanted or list(handle.gpu_classes)
        for cls in chosen:
            if cls not in handle.gpu_classes:
                raise UserError(
                    f"GPU class {cls!r} is not served by this cluster (it serves: "
                    f"{', '.join(handle.gpu_classes)})"
                )
        run = _Run(plan, handle, chosen, wait_limit(handle.kind), log)
        proposer: _Sampled | _Searched = _Searched() if plan.spec.search is not None else _Sampled()
        t0 = time.perf_counter()
        plans = proposer.plans(run)
        clock.planning = time.perf_counter() - t0
        _write_meta(folder, run.spec, plans)
        t0 = time.perf_counter()
        timing = proposer.measure(run, plans)
        clock.measuring = time.perf_counter() - t0
        merged = merge(plan.out, allow_missing=bool(timing and timing.get("stopped_early")), log=log)
        log(f"merged {merged.num_rows} rows from {len(folder.shards())} shards into {folder.merged_dir}")
        clock.compiling = _compile_seconds(plan.out, clock.wall)
        _models_and_picks(run, proposer, plans)
    stages = _stages(clock)
    if timing is not None:  # a rerun with nothing left keeps the last run's timing
        folder.write_timing({**timing, "stages": stages})
    report = build_report(plan.out, log)
    log(f"report: {folder.report_md}")
    log(_stages_line(_stages(clock)))
    return report


def _compile_seconds(out: Path, since: datetime) -> float:
    """Seconds the rows measured in this run spent compiling (their ``compile_ms``, inside the measuring)."""
    rows = load_merged(out)
    if "compile_ms" not in rows or "timestamp" not in rows:
        return 0.0
    return float(rows.loc[rows["timestamp"] >= since, "compile_ms"].fillna(0).sum()) / 1000


@dataclass
class _Clock:
    """A run's clock: when it started (``time.perf_counter``, and the wall time its rows' timestamps are
    compared with) and the seconds of each stage, as they end."""

    started: float
    wall: datetime
    planning: float = 0.0
    measuring: float = 0.0
    compiling: float = 0.0


def _stages(clock: _Clock) -> dict[str, float]:
    """Where this run's time went (``timing.json``'s ``stages``): planning (the plan or a search's pool, on
    a worker), compiling and measuring (the measuring less its rows' compile time), and the rest (the
    cluster's start and end, waiting, merge, models, re-measuring, the report); ``command_s`` from the
    process's start, its imports included."""
    import psutil

    total = time.perf_counter() - clock.started
    measuring = clock.measuring
    compiling = min(clock.compiling, measuring)
    planning = clock.planning
    stages = {
        "planning_s": planning,
        "compiling_s": compiling,
        "measuring_s": measuring - compiling,
        "rest_s": total - planning - measuring,
        "total_s": total,
        "command_s": time.time() - psutil.Process().create_time(),
    }
    return {k: round(v, 2) for k, v in stages.items()}


def _stages_line(stages: dict[str, float]) -> str:
    return (
        f"done in {stages['command_s']:.1f} s: planning {stages['planning_s']:.1f} s, compiling "
        f"{stages['compiling_s']:.1f} s, measuring {stages['measuring_s']:.1f} s, the rest "
        f"{stages['command_s'] - stages['planning_s'] - stages['compiling_s'] - stages['measuring_s']:.1f} s "
        "(start-up, merge, models, re-measuring, report)"
    )
