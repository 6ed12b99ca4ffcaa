"""Measuring a sweep's batches on the cluster: workers warmed before the clock, batches fed in order as
workers free up (local clusters) or all at once (SLURM), progress shown, throughput per worker recorded."""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from launchtune.kernels.progress import Progress

from ..cluster.waits import POLL_S, ClusterFailure, gone_limit, timed_out, wait_limit
from ..errors import UserError
from ..logs import show_bars
from ..store.batching import measure_order
from ..store.folder import SweepFolder
from ..store.schema import plan_schema
from ..store.shards import Planned, pending_batches
from ..store.spec import SweepSpec
from .worker import compile_task, measure_batch, warm_task

Log = Callable[[str], None]


def warm_workers(client, spec_d: dict, classes: Sequence[str], log: Log, timeout: float = 300.0) -> dict:
    """Build the workload on every worker of ``classes`` before the clock starts (see ``warm_task``), waiting
    at most ``timeout`` seconds.

    Local clusters only: their workers are all there from the start and stay. Returns per-worker facts.
    """

    futures = []
    for addr, w in client.scheduler_info()["workers"].items():
        for cls in classes:
            if w.get("resources", {}).get(cls):
                futures.append(
                    client.submit(
                        warm_task,
                        spec_d,
                        workers=[addr],
                        allow_other_workers=False,
                        resources={cls: 1},
                        pure=False,
                        key=f"warm-{cls}-{w.get('name')}-{time.time_ns()}",
                    )
                )
    from distributed import wait  # the Dask path's only (one local device measures without it)

    try:
        wait(futures, timeout=timeout)
    except TimeoutError:  # Dask's wait raises on its limit; the ready workers' facts are still wanted
        pass
    done = [f for f in futures if f.done()]
    not_done = [f for f in futures if not f.done()]
    if not_done:
        client.cancel(not_done)
        log(f"{len(not_done)} worker(s) not ready after {timeout:.0f} s; measuring anyway")
    facts = {}
    for f in done:
        if f.status != "finished":
            log(f"warm-up failed on a worker: {f.exception()}")
            continue
        w = f.result()
        facts[w["worker"]] = w
        gpu = f", pci {w['pci_bus_id']}" if w["pci_bus_id"] else ""
        copy = w["measured_bandwidth_gbs"]  # None for recorded answers (replay): nothing was measured
        log(
            f"worker {w['worker']}: {w['device_name']}{gpu}"
            + (f", copy {copy} GB/s" if copy is not None else "")
            + (f", but it sees {w['visible_gpus']} GPUs" if w["visible_gpus"] > 1 else "")
        )
    return facts


def _queues(
    spec: SweepSpec, batch_size: int, plans: Mapping[str, Mapping[str, Any]], out: Path, log: Log
) -> tuple[dict[str, deque], int]:
    """Each class's unfinished batches in measuring order, each with its priority; and how many are done."""
    queues: dict[str, deque] = {}
    skipped = 0
    for cls, plan in plans.items():
        ordered = measure_order(plan["configs"], batch_size)
        rank = {batch: r for r, (batch, _) in enumerate(ordered)}
        schema = plan_schema(plan, search=False)
        planned = Planned(list(plan["params"]), spec.seed)
        todo, finished = pending_batches(out, cls, ordered, schema, log, planned)
        skipped += finished
        # Dask does not keep submission order on its own; a time-limited sweep must measure the plan's
        # batches in order (per-kernel grids first, then sample ids): hence the priority.
        queues[cls] = deque((batch, rows, len(ordered) - rank[batch]) for batch, rows in todo)
    if skipped:
        log(f"{skipped} finished shard(s) kept; {sum(len(q) for q in queues.values())} batch(es) to measure")
    return queues, skipped


def _raise_failures(fatal: str | None, errors: list[str], feeder: _Feeder, measured: str) -> None:
    """One line for a folder that cannot be written (``fatal``: every later batch would fail alike) or for
    batch tasks the cluster lost; what was measured is kept either way."""
    if fatal is not None:
        feeder.client.cancel([f for f in feeder.futures if not f.done()])
        raise UserError(
            f"{fatal}; stopped at the first such batch ({measured} measured before are kept); "
            "fix the folder and rerun to measure the rest"
        )
    if errors:  # measure_batch turns a workload's failure into a row: what is left is the cluster's (a worker
        # killed more often than Dask's allowed-failures lets a task be retried)
        raise ClusterFailure(
            f"measure: {len(errors)} batch task(s) failed on the cluster; first: {errors[0]}"[:600]
            + "; what was measured is kept, the same command again goes on"
        )


class _Feeder:
    """Submits a class's batches in measuring order while the class has room.

    On the local cluster (``n_workers`` given): two per worker of the class (one running, one waiting, so no
    card waits for the next batch), and one per worker once the tail parts come (a part waiting behind a
    neighbour's batch is what a tail is made of). Dask assigns a restricted task to a worker when it is
    submitted and evens out only by work stealing, which rates every batch of a sweep alike and moves one
    only past a clear surplus; with everything submitted at once, one card could still have batches queued
    while the other sits idle. Fed, a card that finishes takes the next batch, and the cards end within one
    tail part of each other. Without ``n_workers`` (SLURM) everything is submitted at once.
    """

    def __init__(
        self,
        client: Any,
        spec_d: dict,
        plans: Mapping[str, Mapping[str, Any]],
        out: Path,
        queues: dict[str, deque],
        n_workers: dict[str, int] | None,
    ) -> None:
        self.client, self.spec_d, self.plans, self.out = client, spec_d, plans, out
        self.queues, self.n_workers = queues, n_workers
        self.in_flight = dict.fromkeys(plans, 0)
        self.class_of: dict[str, str] = {}
        self.futures: list = []

    def room(self, cls: str) -> bool:
        if self.n_workers is None:
            return True
        tail = "." in self.queues[cls][0][0]
        return self.in_flight[cls] < (1 if tail else 2) * self.n_workers[cls]

    def feed(self, cls: str) -> list:
        new = []
        while self.queues[cls] and self.room(cls):
            batch, batch_rows, priority = self.queues[cls].popleft()
            future = self.client.submit(
                measure_batch,
                self.spec_d,
                # what the shard's schema is made of (schema.plan_schema): the objective's columns too
                {
                    k: self.plans[cls][k]
                    for k in ("params", "kernels", "measures", "objective")
                    if k in self.plans[cls]
                },
                cls,
                batch,
                batch_rows,
                str(SweepFolder(self.out).shard_path(cls, batch)),
                str(self.out),
                resources={cls: 1},
                pure=False,
                retries=2,
                priority=priority,
                key=f"measure-{cls}-{batch}-{time.time_ns()}",
            )
            self.in_flight[cls] += 1
            self.class_of[future.key] = cls
            new.append(future)
        self.futures.extend(new)
        return new


def _per_worker(results: list[dict], t0: float, warmed: dict[str, dict] | None = None) -> dict[str, dict]:
    """Rows, batches and busy time per worker; first start and last end in seconds after the clock started;
    the card each warmed worker holds (``warmed``: ``warm_workers``' answer)."""
    per: dict[str, dict] = {}
    for r in results:
        if not r.get("measured", True) or "worker" not in r:
            continue
        w = per.setdefault(
            r["worker"],
            {
                "gpu_class": r["gpu_class"],
                "rows": 0,
                "batches": 0,
                "busy_s": 0.0,
                "first_start_s": None,
                "last_end_s": 0.0,
                "longest_batch_s": 0.0,
            },
        )
        took = r["finished"] - r["started"]
        w["rows"] += r["rows"]
        w["batches"] += 1
        w["busy_s"] += took
        w["longest_batch_s"] = max(w["longest_batch_s"], took)
        start, end = r["started"] - t0, r["finished"] - t0
        w["first_start_s"] = start if w["first_start_s"] is None else min(w["first_start_s"], start)
        w["last_end_s"] = max(w["last_end_s"], end)
    for w in per.values():
        for k in ("busy_s", "first_start_s", "last_end_s", "longest_batch_s"):
            w[k] = round(w[k], 3)
        w["samples_per_s"] = round(w["rows"] / w["busy_s"], 3) if w["busy_s"] > 0 else None
    card = ("device_name", "pci_bus_id", "cuda_visible_devices", "measured_bandwidth_gbs")
    for name, facts in (warmed or {}).items():
        if name in per:
            per[name].update({k: facts[k] for k in card})
    return per


def _finish_spread(per: dict[str, dict]) -> dict[str, float]:
    """Per class: seconds between the first and the last of its workers to finish (the tail)."""
    ends: dict[str, list[float]] = {}
    for w in per.values():
        ends.setdefault(w["gpu_class"], []).append(w["last_end_s"])
    return {cls: round(max(e) - min(e), 3) for cls, e in ends.items()}


# How often the measuring loop looks at the cluster while it waits, and how long a local class may have no
# worker at all while its batches wait (``cluster.waits``: POLL_S, gone_limit); without this look the sweep
# sat silent until the wait limit (an hour).


def _names_by_class(client, classes: Sequence[str]) -> dict[str, set[str]]:
    names: dict[str, set[str]] = {cls: set() for cls in classes}
    for w in client.scheduler_info()["workers"].values():
        for cls in classes:
            if w.get("resources", {}).get(cls):
                names[cls].add(str(w.get("name")))
    return names


def _check_workers(
    client, expected: dict[str, set[str]], in_flight: dict[str, int], gone_since: dict[str, float]
) -> None:
    """A class with batches in flight and none of its workers left for ``gone_limit()`` seconds: one line
    naming them."""
    now, gone_s = time.perf_counter(), gone_limit()
    present = _names_by_class(client, list(expected))
    for cls, names in expected.items():
        if not in_flight.get(cls) or present.get(cls):
            gone_since.pop(cls, None)
            continue
        since = gone_since.setdefault(cls, now)
        if now - since >= gone_s:
            raise ClusterFailure(
                f"measure: worker {', '.join(sorted(names))} of class {cls} died and was not restarted "
                f"within {gone_s:g} s; what was measured is kept, the same command again goes on"
            )


def workers_by_class(client, classes: Sequence[str]) -> dict[str, int]:
    counts = dict.fromkeys(classes, 0)
    for w in client.scheduler_info()["workers"].values():
        for cls in classes:
            if w.get("resources", {}).get(cls):
                counts[cls] += 1
    return counts


def measure_batches(
    client,
    spec: SweepSpec,
    plans: Mapping[str, Mapping[str, Any]],
    out: Path,
    log: Log,
    max_minutes: float | None = None,
    local: bool = False,
    limit: float | None = None,
) -> dict[str, Any]:
    """One task per unfinished batch; returns throughput and per-worker use (``timing.json``).

    ``local``: the cluster's workers are all there and stay (the local cluster), so every worker builds its
    workload before the clock starts, and batches are fed in measuring order (:class:`_Feeder`); a SLURM
    cluster gets everything at once: its job count follows the number of unfinished tasks.

    ``limit``: seconds to wait for the next batch to finish (``pipeline.cluster.waits``; None: the local
    cluster's default); past it the sweep stops with one line, keeping every shard written.
    """
    from distributed import wait  # Dask's, imported where Dask measures (not in measure_in_process)

    limit = limit or wait_limit("local")
    if not isinstance(spec.batch_size, int):
        raise ValueError("measure_batches: batch_size auto must be chosen before measuring (run_plan does)")
    spec_d = spec.to_dict()
    queues, skipped = _queues(spec, spec.batch_size, plans, out, log)
    total = sum(len(q) for q in queues.values())
    workers: dict[str, dict] = {}
    if local and total:
        workers = warm_workers(client, spec_d, list(plans), log, timeout=min(300.0, limit))
    n_workers = {cls: max(1, n) for cls, n in workers_by_class(client, list(plans)).items()}
    feeder = _Feeder(client, spec_d, plans, out, queues, n_workers if local else None)
    in_flight, class_of = feeder.in_flight, feeder.class_of
    feed = feeder.feed

    t0 = time.perf_counter()
    wall0 = time.time()
    fatal = None
    stopped_early = False
    tally = _Tally()
    deadline = t0 + max_minutes * 60 if max_minutes else None
    # A bar on a terminal; in a log file (a batch job, CI) a plain line every tenth of the way instead, and at
    # least every 10 s while batches finish, with an estimate of the time left.
    tty = show_bars()
    step = max(1, total // 10)
    meter = Progress(log)
    expected = _names_by_class(client, list(plans)) if local else {}
    gone_since: dict[str, float] = {}
    last_progress = time.perf_counter()
    with tqdm(total=total, unit="batch", desc="measure", file=sys.stderr, disable=not tty) as bar:
        pending = {f for cls in plans for f in feed(cls)}
        while pending and fatal is None:
            now = time.perf_counter()
            left = None if deadline is None else deadline - now
            if left is not None and left <= 0:
                client.cancel(list(pending))
                stopped_early = True
                log(
                    f"time limit of {max_minutes} min reached: {tally.done} of {total} batches measured; "
                    "the same command again measures the rest"
                )
                break
            if now - last_progress >= limit:
                client.cancel(list(pending))
                raise timed_out(f"measure: no batch finished ({len(pending)} in flight)", limit)
            # the first to finish, waiting in slices so that a worker gone for good is seen between them
            slice_s = min(POLL_S, limit - (now - last_progress), left if left is not None else POLL_S)
            try:
                finished, pending = wait(pending, timeout=max(slice_s, 0.01), return_when="FIRST_COMPLETED")
            except TimeoutError:
                if local:
                    _check_workers(client, expected, in_flight, gone_since)
                continue
            last_progress = time.perf_counter()
            gone_since.clear()
            for future in finished:
                fatal = tally.take(future, log)
                if fatal is not None:  # not writable, read-only, full: every later batch fails alike
                    break
                cls = class_of[future.key]
                in_flight[cls] -= 1
                pending.update(feed(cls))
                bar.update(1)
                if not tty:
                    done = tally.done
                    meter.update(done / total, f"measure: {done}/{total} batches", force=done % step == 0)
    seconds = time.perf_counter() - t0
    done = tally.done
    _raise_failures(fatal, tally.errors, feeder, f"{done} of {total}")
    counts = {
        "rows": tally.rows,
        "ok": tally.ok,
        "batches": done,
        "planned": total + skipped,
        "to_measure": total,
    }
    workers_n = len(client.scheduler_info()["workers"])
    return _timing(counts, seconds, workers_n, _per_worker(tally.results, wall0, workers), stopped_early)


@dataclass
class _Tally:
    """What the finished batches answered: their rows and ok rows, each batch's result (its worker's use),
    each failed task as one line, how many finished."""

    rows: int = 0
    ok: int = 0
    done: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def take(self, future: Any, log: Log) -> str | None:
        """One finished batch counted (its note logged, a task's error kept as one line); the fatal error it
        reports instead, if any (then it is not counted)."""
        try:
            result = future.result()
            if "fatal" in result:
                return result["fatal"]
            if result.get("note"):
                log(result["note"])
            self.rows += result["rows"]
            self.ok += result["ok"]
            self.results.append(result)
        except Exception as exc:
            first = (str(exc).splitlines() or [""])[0]
            self.errors.append(f"{future.key}: {type(exc).__name__}: {first}")
        self.done += 1
        return None


def _timing(
    counts: dict[str, int], seconds: float, workers: int, per_worker: dict[str, dict], stopped_early: bool
) -> dict[str, Any]:
    """``timing.json``'s record of a measuring run."""
    return {
        "rows": counts["rows"],
        "ok": counts["ok"],
        "batches": counts["batches"],
        "batches_planned": counts["planned"],
        "batches_to_measure": counts["to_measure"],
        "seconds": round(seconds, 2),
        "workers": workers,
        "samples_per_minute": round(60 * counts["rows"] / seconds, 2) if seconds > 0 else None,
        "per_worker": per_worker,
        "finish_spread_s": _finish_spread(per_worker),
        "stopped_early": stopped_early,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


# Configurations queued on the workload's compile pool ahead of the batch being measured, in measuring
# order (``measure_in_process``): enough to keep the compile threads busy while the GPU measures, few enough
# that a time limit or Ctrl-C wastes little.
COMPILE_AHEAD = 64


def _compile_ahead(spec_d: dict[str, Any], upcoming: list[Any], queued: int) -> int:
    """Queue ``upcoming[queued:]`` to compile (the batch about to be measured and up to ``COMPILE_AHEAD``
    beyond it: a batch's own compiles would otherwise start only when it starts, one compile's latency per
    batch on the GPU's clock); returns how far ``upcoming`` is queued. A workload that cannot be built is
    left for the batch to report."""
    target = len(upcoming)
    if target <= queued:
        return queued
    try:
        compile_task(spec_d, upcoming[queued:target])
    except Exception:  # noqa: BLE001  (measure_batch builds it again and reports why, as its row or fatal)
        return queued
    return target


def measure_in_process(
    spec: SweepSpec,
    plans: Mapping[str, Mapping[str, Any]],
    out: Path,
    log: Log,
    max_minutes: float | None = None,
) -> dict[str, Any]:
    """The unfinished batches measured one after the other in this process (one local device,
    ``cluster.inline``), in measuring order; returns ``timing.json``'s record as :func:`measure_batches` does.
    Each batch is its shard, written atomically, so an interrupted run resumes where it stopped."""
    if not isinstance(spec.batch_size, int):
        raise ValueError(
            "measure_in_process: batch_size auto must be chosen before measuring (run_plan does)"
        )
    spec_d = spec.to_dict()
    queues, skipped = _queues(spec, spec.batch_size, plans, out, log)
    total = sum(len(q) for q in queues.values())
    t0, wall0 = time.perf_counter(), time.time()
    deadline = t0 + max_minutes * 60 if max_minutes else None
    counts = {"rows": 0, "ok": 0, "batches": 0, "planned": total + skipped, "to_measure": total}
    results, stopped_early = [], False
    meter, tty, step = Progress(log), show_bars(), max(1, total // 10)
    with tqdm(total=total, unit="batch", desc="measure", file=sys.stderr, disable=not tty) as bar:
        for cls, queue in queues.items():
            keys = ("params", "kernels", "measures", "objective")
            plan = {k: plans[cls][k] for k in keys if k in plans[cls]}
            upcoming = [config for _, batch_rows, _ in queue for _, _, config in batch_rows]
            queued = at = 0  # how far upcoming is queued to compile; where measuring is
            for batch, batch_rows, _ in queue:
                if deadline is not None and time.perf_counter() >= deadline:
                    stopped_early = True
                    break
                at += len(batch_rows)
                queued = _compile_ahead(spec_d, upcoming[: at + COMPILE_AHEAD], queued)
                path = str(SweepFolder(out).shard_path(cls, batch))
                result = measure_batch(spec_d, plan, cls, batch, batch_rows, path, str(out))
                if "fatal" in result:
                    raise UserError(
                        f"{result['fatal']}; stopped at the first such batch ({counts['batches']} of {total} "
                        "measured before are kept); fix the folder and rerun to measure the rest"
                    )
                if result.get("note"):
                    log(result["note"])
                counts.update(rows=counts["rows"] + result["rows"], ok=counts["ok"] + result["ok"])
                counts["batches"] += 1
                results.append(result)
                bar.update(1)
                if not tty:
                    done = counts["batches"]
                    meter.update(done / total, f"measure: {done}/{total} batches", force=done % step == 0)
    if stopped_early:
        log(
            f"time limit of {max_minutes} min reached: {counts['batches']} of {total} batches measured; "
            "the same command again measures the rest"
        )
    per_worker = _per_worker(results, wall0)
    return _timing(counts, time.perf_counter() - t0, 1, per_worker, stopped_early)
