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
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from launchtune.kernels.atomic import atomic_path
from launchtune.kernels.workload import SEED_MAX
from launchtune.pipeline.cluster import open_cluster
from launchtune.pipeline.cluster.waits import result, wait_limit
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.learn.pick import incumbents, known_failures
from launchtune.pipeline.learn.train import train_sweep
from launchtune.pipeline.results.report import build_report, remeasure_line
from launchtune.pipeline.store.batching import auto_batch_size
from launchtune.pipeline.store.checksums import EditedFile
from launchtune.pipeline.store.folder import PLAN_FACTS, PLANNED_WITH, SweepFolder, data_hash
from launchtune.pipeline.store.lock import sweep_lock
from launchtune.pipeline.store.ownership import claim
from launchtune.pipeline.store.shards import load_merged, merge
from launchtune.pipeline.store.spec import SweepSpec
from launchtune.pipeline.sweep.measure import measure_batches, warm_workers, workers_by_class
from launchtune.pipeline.sweep.plan import SweepPlan
from launchtune.pipeline.sweep.remeasure import remeasure_task
from launchtune.pipeline.sweep.worker import plan_task

logger = logging.getLogger(__name__)

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
) -> dict[str, Any]:
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
    plan = result(future, f"the plan of class {cls}", limit)
    plan["planned_with"] = wanted
    folder.write_plan(cls, plan)
    return plan


def remeasure_picks(
    client,
    spec: SweepSpec,
    plans: dict[str, dict],
    trained: dict,
    metrics: dict,
    out: Path,
    log: Log,
    limit: float | None = None,
    local: bool = False,
) -> None:
    """Each class's predicted best against its default, measured on a worker of that class (``client``
    submits ``remeasure_task`` with the class as resource), into ``validation.json``; each class's answer
    waited for at most ``limit`` seconds (``pipeline.cluster.waits``; None: the local cluster's default), and,
    on the ``local`` cluster (whose dead workers do not come back), no longer than ``gone_limit()`` (30 s,
    ``$LAUNCHTUNE_GONE_S``) without a worker of the class."""
    limit = limit or wait_limit("local")
    folder = SweepFolder(out)
    validation = folder.read_validation() or {}
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
    folder.write_validation(validation)


def _up_to_date(out: Path, plans: dict[str, dict]) -> bool:
    """True when the merged data is what the saved models were trained on and every class was re-measured."""
    folder = SweepFolder(out)
    try:
        metrics, validation = folder.read_metrics(), folder.read_validation()
    except UserError:
        return False
    if metrics is None or validation is None:
        return False
    return metrics.get("data_hash") == data_hash(load_merged(out)) and all(c in validation for c in plans)


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


def run_sweep(
    spec: SweepSpec,
    out: Path,
    cluster: str | Any,
    classes: Sequence[str] | None,
    force: bool,
    workers_per_class: int = 1,
    log: Log = logger.info,
    max_minutes: float | None = None,
    prior: Sequence[Any] = (),
) -> dict[str, Any]:
    """Everything ``launchtune sweep`` does, in order, under the folder's lock; returns the report.
    With ``spec.search`` a strategy chooses what is measured (``pipeline.sweep.search``; ``prior``: the
    datasets of ``launchtune.pipeline.sweep.priors.load_priors``). ``cluster``: ``local``, ``slurm``, a
    cluster config's path, or a Dask ``Client`` or cluster object, used and left running."""
    with sweep_lock(out, log):
        return _run_sweep(spec, out, cluster, classes, force, workers_per_class, log, max_minutes, prior)


def run_plan(plan: SweepPlan, log: Log = logger.info) -> dict[str, Any]:
    """Run a checked plan (``sweep.plan.plan_sweep``): what ``launchtune sweep`` and the Python API do."""
    return run_sweep(
        plan.spec,
        plan.out,
        plan.cluster,
        plan.classes,
        plan.force,
        plan.workers_per_class,
        log=log,
        max_minutes=plan.max_minutes,
        prior=plan.prior,
    )


def _search(
    handle: Any,
    spec: SweepSpec,
    chosen: list[str],
    out: Path,
    classes: Sequence[str] | None,
    force: bool,
    prior: Sequence[Any],
    log: Log,
    limit: float,
) -> None:
    """A search sweep's measuring, merge, training and re-measured picks (the report follows as for any)."""
    from launchtune.pipeline.sweep.priors import check_params, constants_of
    from launchtune.pipeline.sweep.search import remeasure_search_pick, run_searches, search_pool_plan

    assert spec.search is not None
    folder = SweepFolder(out)
    plans = {}
    for cls in chosen:
        if force and classes and cls in classes:
            shutil.rmtree(folder.shard_dir(cls), ignore_errors=True)
            folder.search_journal(cls).unlink(missing_ok=True)
        plan = search_pool_plan(handle.client, spec, cls, limit)
        check_params(prior, plan["params"], "--prior", constants_of(plan["values"]))
        plans[cls] = plan
        facts = {k: v for k, v in plan.items() if k != "pool"}
        folder.write_plan(cls, {**facts, "n_configs": len(plan["pool"]), "search": spec.to_dict()["search"]})
        log(
            f"search {cls}: {spec.search.strategy}, {spec.search.budget} measurements among "
            f"{len(plan['pool'])} configurations on {plan['device']['device_name']}"
        )
    first = next(iter(plans.values()))
    folder.write_meta(
        {
            "spec": spec.to_dict(),
            "planning_key": spec.planning_key(),
            "plan": {k: first[k] for k in PLAN_FACTS if k in first},
            "updated": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    )
    widths = workers_by_class(handle.client, chosen)
    if handle.kind == "local":
        warm_workers(handle.client, spec.to_dict(), chosen, log, timeout=min(300.0, limit))
    t0 = time.perf_counter()
    found = run_searches(handle.client, spec, plans, out, widths, prior, log, limit)
    seconds = time.perf_counter() - t0
    measured = sum(f.measured for f in found.values())
    if measured:  # a rerun with nothing left keeps the last run's timing
        folder.write_timing(
            {
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
                    for c, f in found.items()
                },
                "at": datetime.now(UTC).isoformat(timespec="seconds"),
            }
        )
    merged = merge(out, log=log)
    log(f"merged {merged.num_rows} rows from {len(folder.shards())} shards into {folder.merged_dir}")
    if _up_to_date(out, plans):
        log("nothing new since the last training: models and re-measurements kept")
        return
    train_sweep(out, log)
    validation = folder.read_validation() or {}
    for cls, f in found.items():
        answer = remeasure_search_pick(handle.client, spec, f, limit)
        validation[cls] = answer
        if answer["candidates"]:
            line = remeasure_line(
                answer["candidates"][0],
                answer["default"],
                answer.get("comparison"),
                answer["backend"],
                answer.get("objective"),
            )
            log(f"re-measured {cls}'s search pick: {line}")
        else:
            log(
                f"re-measured {cls}: none of the search's {len(answer['rejected'])} best configurations "
                "ran again"
            )
    folder.write_validation(validation)


def _run_sweep(
    spec: SweepSpec,
    out: Path,
    cluster: str | Any,
    classes: Sequence[str] | None,
    force: bool,
    workers_per_class: int,
    log: Log,
    max_minutes: float | None,
    prior: Sequence[Any] = (),
) -> dict[str, Any]:
    folder = SweepFolder(out)
    claim(out, "sweep", "--out")  # a new or empty folder, or a sweep's: nothing else is replaced
    start_afresh_if_edited(out, force, classes, log)
    spec = keep_batch_size(spec, folder.planning_key(), force and not classes, log)
    check_previous(out, spec, force, classes, log)
    wanted = list(classes or spec.gpu_classes or []) or None
    with open_cluster(cluster, wanted, workers_per_class, folder.dask_dir, log) as handle:
        limit = wait_limit(handle.kind)
        chosen = wanted or list(handle.gpu_classes)
        for cls in chosen:
            if cls not in handle.gpu_classes:
                raise UserError(
                    f"GPU class {cls!r} is not served by this cluster (it serves: "
                    f"{', '.join(handle.gpu_classes)})"
                )
        if spec.search is not None:
            _search(handle, spec, chosen, out, classes, force, prior, log, limit)
            report = build_report(out, log)
            log(f"report: {folder.report_md}")
            return report
        plans = {}
        for cls in chosen:
            redo = force and (not classes or cls in classes)
            if redo and classes:
                shutil.rmtree(folder.shard_dir(cls), ignore_errors=True)
            plans[cls] = plan_class(handle.client, spec, cls, out, replan=redo, limit=limit)
            log(
                f"plan {cls}: {len(plans[cls]['configs'])} configurations "
                f"on {plans[cls]['device']['device_name']}"
            )
        if spec.batch_size == "auto":
            spec = replace(spec, batch_size=auto_batch_size(plans, workers_by_class(handle.client, chosen)))
            log(f"batch_size auto: {spec.batch_size} (kept for this folder's reruns)")
        first = next(iter(plans.values()))
        folder.write_meta(
            {
                "spec": spec.to_dict(),
                "planning_key": spec.planning_key(),
                "plan": {k: first[k] for k in PLAN_FACTS if k in first},
                "updated": datetime.now(UTC).isoformat(timespec="seconds"),
            },
        )
        with performance_report(folder.performance_report, log):
            timing = measure_batches(
                handle.client, spec, plans, out, log, max_minutes, local=handle.kind == "local", limit=limit
            )
        if timing["batches_to_measure"]:  # a rerun with nothing left keeps the last run's timing
            folder.write_timing(timing)
        if timing["batches"]:
            log(
                f"measured {timing['rows']} configurations in {timing['seconds']} s "
                f"({timing['samples_per_minute']} per minute)"
            )
        merged = merge(out, allow_missing=bool(timing.get("stopped_early")), log=log)
        log(f"merged {merged.num_rows} rows from {len(folder.shards())} shards into {folder.merged_dir}")
        if _up_to_date(out, plans):
            log("nothing new since the last training: models and re-measurements kept")
        else:
            trained = train_sweep(out, log)
            remeasure_picks(
                handle.client,
                spec,
                plans,
                trained["models"],
                trained["metrics"],
                out,
                log,
                limit,
                local=handle.kind == "local",
            )
    report = build_report(out, log)
    log(f"report: {folder.report_md}")
    return report
