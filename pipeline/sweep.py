"""The sweep graph: plan on each class's worker -> one task per (class, batch) writing a shard -> merge ->
train
-> re-measure the predicted best and the default on each class -> report.

Finished shards are skipped on rerun, so an interrupted sweep resumes where it stopped; ``force`` with classes
redoes only those partitions. Tasks carry ``resources={class: 1}`` so a class's batches run only on its
workers.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.errors import UserError
from pipeline.shards import is_finished, list_shards, merge, shard_dir, shard_path
from pipeline.spec import SweepSpec

Log = Callable[[str], None]


def batches(configs: Sequence[tuple[str, dict[str, int]]], size: int) -> list[tuple[str, list]]:
    """Consecutive sample ids in batches of ``size``; batch names are stable, so a rerun finds its shards."""
    rows = [(i, sampler, config) for i, (sampler, config) in enumerate(configs)]
    return [(f"{b // size:05d}", rows[b : b + size]) for b in range(0, len(rows), size)]


# The tail: with several workers of a class, the sweep ends when the last batch ends, and a card that finds
# the queue empty waits for the others' last batches. So the last TAIL_BATCHES batches in measuring order
# are cut into TAIL_PARTS parts each: the cards end within about a quarter batch of each other instead of a
# whole one, while the rest keep their size (a task and a shard per batch cost little, but not nothing).
# Fixed numbers, not a function of the worker count, so the names are the same on 1 GPU or 8 and a rerun
# finds its shards; 4 x 4 parts even out up to about 4 workers of a class, and more workers are still no
# worse off than with whole batches. Below TAIL_MIN_SIZE a batch is already fine-grained and left whole.
# Between batches, Dask's work stealing (which honours resource restrictions) moves queued batches from a
# busy card to an idle one of the same class.
TAIL_BATCHES = 4
TAIL_PARTS = 4
TAIL_MIN_SIZE = 16


def measure_order(configs: Sequence[tuple[str, dict[str, int]]], size: int) -> list[tuple[str, list]]:
    """The batches in the order they are measured, with stable names.

    Batches holding per-kernel grids first (they are few, and a time-limited sweep should not lose them), then
    the rest by sample id; where ``size >= TAIL_MIN_SIZE`` the last ``TAIL_BATCHES`` are cut into
    ``TAIL_PARTS`` parts named ``<batch>.<part>`` (``00107.0`` .. ``00107.3``).
    """
    ordered = sorted(
        batches(configs, size),
        key=lambda b: not any(row[1] == "per_kernel_exhaustive" for row in b[1]),
    )
    if size < TAIL_MIN_SIZE:
        return ordered
    out = ordered[:-TAIL_BATCHES]
    for name, rows in ordered[-TAIL_BATCHES:]:
        k = min(TAIL_PARTS, len(rows))
        cut = [round(j * len(rows) / k) for j in range(k + 1)]
        out += [(f"{name}.{j}", rows[cut[j] : cut[j + 1]]) for j in range(k)]
    return out


def pending_batches(out: Path, cls: str, ordered: list[tuple[str, list]]) -> tuple[list, int]:
    """The batches of ``ordered`` still to measure, and how many are finished already.

    A tail part counts as finished also where its whole batch's shard is on disk: a folder measured before
    the tail was cut holds ``shard-00107.parquet``, and measuring ``00107.0`` too would double its samples.
    """
    todo, finished = [], 0
    for batch, rows in ordered:
        whole = batch.split(".", 1)[0]
        if is_finished(shard_path(out, cls, batch)) or (
            whole != batch and is_finished(shard_path(out, cls, whole))
        ):
            finished += 1
        else:
            todo.append((batch, rows))
    return todo, finished


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(path)


def check_previous(out: Path, spec: SweepSpec, force: bool, classes: Sequence[str] | None, log: Log) -> None:
    """A folder holds one sweep: a rerun must plan the same samples, or start afresh with --force."""
    meta = out / "sweep.json"
    if not meta.is_file():
        return
    try:
        old = json.loads(meta.read_text())["planning_key"]
    except (ValueError, KeyError) as exc:
        raise UserError(
            f"{meta}: unreadable sweep description ({exc}); remove the folder or pick another --out"
        ) from None
    new = spec.planning_key()
    differs = [k for k in new if old.get(k) != new[k]]
    if not differs:
        return
    if force and not classes:
        log(f"--force: {out} was planned with other {', '.join(differs)}; starting it afresh")
        for name in ("shards", "merged", "models", "plan", "figures"):
            shutil.rmtree(out / name, ignore_errors=True)
        for name in ("validation.json", "report.json", "report.md", "tuning_table.json", "timing.json"):
            (out / name).unlink(missing_ok=True)
        return
    k = differs[0]
    raise UserError(
        f"{out}: this folder holds a sweep planned with {k}={old.get(k)!r}, not {new[k]!r}; "
        "use another --out, "
        "or --force (without --gpu-class) to start it afresh"
    )


def _plan_class(client, spec: SweepSpec, cls: str, out: Path, replan: bool) -> dict[str, Any]:
    from pipeline.worker import plan_task

    path = out / "plan" / f"{cls}.json"
    if path.is_file() and not replan:
        plan = json.loads(path.read_text())
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
    plan = future.result()
    _write_json(path, plan)
    return plan


def _warm_workers(client, spec_d: dict, classes: Sequence[str], log: Log, timeout: float = 300) -> dict:
    """Build the workload on every worker of ``classes`` before the clock starts (see ``warm_task``).

    Local clusters only: their workers are all there from the start and stay. Returns per-worker facts.
    """
    from distributed import wait

    from pipeline.worker import warm_task

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
    done, not_done = wait(futures, timeout=timeout)
    if not_done:
        client.cancel(list(not_done))
        log(f"{len(not_done)} worker(s) not ready after {timeout:.0f} s; measuring anyway")
    facts = {}
    for f in done:
        if f.status != "finished":
            log(f"warm-up failed on a worker: {f.exception()}")
            continue
        w = f.result()
        facts[w["worker"]] = w
        gpu = f", pci {w['pci_bus_id']}" if w["pci_bus_id"] else ""
        log(
            f"worker {w['worker']}: {w['device_name']}{gpu}, copy {w['measured_bandwidth_gbs']} GB/s"
            + (f", but it sees {w['visible_gpus']} GPUs" if w["visible_gpus"] > 1 else "")
        )
    return facts


def _per_worker(results: list[dict], t0: float) -> dict[str, dict]:
    """Rows, batches and busy time per worker; first start and last end in seconds after the clock started."""
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
    return per


def _finish_spread(per: dict[str, dict]) -> dict[str, float]:
    """Per class: seconds between the first and the last of its workers to finish (the tail)."""
    ends: dict[str, list[float]] = {}
    for w in per.values():
        ends.setdefault(w["gpu_class"], []).append(w["last_end_s"])
    return {cls: round(max(e) - min(e), 3) for cls, e in ends.items()}


def _workers_by_class(client, classes: Sequence[str]) -> dict[str, int]:
    counts = dict.fromkeys(classes, 0)
    for w in client.scheduler_info()["workers"].values():
        for cls in classes:
            if w.get("resources", {}).get(cls):
                counts[cls] += 1
    return counts


def _measure(
    client,
    spec: SweepSpec,
    plans: dict[str, dict],
    out: Path,
    log: Log,
    max_minutes: float | None = None,
    local: bool = False,
) -> dict[str, Any]:
    """One task per unfinished batch; returns (and writes to ``timing.json``) throughput and per-worker use.

    ``local``: the cluster's workers are all there and stay (the local cluster), so (1) every worker builds
    its workload before the clock starts and (2) batches are fed in measuring order instead of all at once:
    two per worker of the class (one running, one waiting, so no card waits for the next batch), and one
    per worker once the tail parts come (a part waiting behind a neighbour's batch is what a tail is made
    of). Dask assigns a restricted task to a worker when it is submitted and evens out only by work
    stealing, which rates every batch of a sweep alike and moves one only past a clear surplus; with
    everything submitted at once, one card could still have batches queued while the other sits idle. Fed,
    a card that finishes takes the next batch, and the cards end within one tail part of each other.
    A SLURM cluster gets everything at once: its job count follows the number of unfinished tasks.
    """
    from collections import deque

    from distributed import as_completed
    from tqdm import tqdm

    from pipeline.worker import measure_batch

    spec_d = spec.to_dict()
    queues: dict[str, deque] = {}
    skipped = 0
    for cls, plan in plans.items():
        ordered = measure_order(plan["configs"], spec.batch_size)
        rank = {batch: r for r, (batch, _) in enumerate(ordered)}
        todo, finished = pending_batches(out, cls, ordered)
        skipped += finished
        # Dask does not keep submission order on its own; a time-limited sweep must measure the plan's
        # batches in order (per-kernel grids first, then sample ids): hence the priority.
        queues[cls] = deque((batch, rows, len(ordered) - rank[batch]) for batch, rows in todo)
    total = sum(len(q) for q in queues.values())
    if skipped:
        log(f"{skipped} finished shard(s) kept; {total} batch(es) to measure")
    workers: dict[str, dict] = {}
    if local and total:
        workers = _warm_workers(client, spec_d, list(plans), log)
    n_workers = {cls: max(1, n) for cls, n in _workers_by_class(client, list(plans)).items()}

    def room(cls: str) -> bool:
        if not local:
            return True
        tail = "." in queues[cls][0][0]
        return in_flight[cls] < (1 if tail else 2) * n_workers[cls]

    in_flight = dict.fromkeys(plans, 0)
    class_of: dict[str, str] = {}
    futures = []

    def feed(cls: str) -> list:
        new = []
        while queues[cls] and room(cls):
            batch, batch_rows, priority = queues[cls].popleft()
            future = client.submit(
                measure_batch,
                spec_d,
                {k: plans[cls][k] for k in ("params", "kernels")},
                cls,
                batch,
                batch_rows,
                str(shard_path(out, cls, batch)),
                str(out),
                resources={cls: 1},
                pure=False,
                retries=2,
                priority=priority,
                key=f"measure-{cls}-{batch}-{time.time_ns()}",
            )
            in_flight[cls] += 1
            class_of[future.key] = cls
            new.append(future)
        futures.extend(new)
        return new

    t0 = time.perf_counter()
    wall0 = time.time()
    rows = counts_ok = 0
    errors = []
    results = []
    done = 0
    timeout = max_minutes * 60 if max_minutes else None
    # A bar on a terminal; in a log file (a batch job, CI) a plain line every tenth of the way instead.
    tty = sys.stderr.isatty()
    step = max(1, total // 10)
    with tqdm(total=total, unit="batch", desc="measure", file=sys.stderr, disable=not tty) as bar:
        finished_futures = as_completed([f for cls in plans for f in feed(cls)], timeout=timeout)
        try:
            for future in finished_futures:
                try:
                    result = future.result()
                    rows += result["rows"]
                    counts_ok += result["ok"]
                    results.append(result)
                except Exception as exc:
                    errors.append(f"{future.key}: {type(exc).__name__}: {exc}")
                cls = class_of[future.key]
                in_flight[cls] -= 1
                finished_futures.update(feed(cls))
                done += 1
                bar.update(1)
                if not tty and (done % step == 0 or done == total):
                    log(f"measure: {done}/{total} batches, {time.perf_counter() - t0:.0f} s")
        except TimeoutError:
            pending = [f for f in futures if not f.done()]
            client.cancel(pending)
            log(
                f"time limit of {max_minutes} min reached: {done} of {total} batches measured; "
                "the same command again measures the rest"
            )
    seconds = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} batch task(s) failed; first: {errors[0]}")
    per_worker = _per_worker(results, wall0)
    for name, facts_w in workers.items():
        if name in per_worker:
            per_worker[name].update(
                {
                    k: facts_w[k]
                    for k in ("device_name", "pci_bus_id", "cuda_visible_devices", "measured_bandwidth_gbs")
                }
            )
    timing = {
        "rows": rows,
        "ok": counts_ok,
        "batches": done,
        "batches_planned": total + skipped,
        "seconds": round(seconds, 2),
        "workers": len(client.scheduler_info()["workers"]),
        "samples_per_minute": round(60 * rows / seconds, 2) if seconds > 0 else None,
        "per_worker": per_worker,
        "finish_spread_s": _finish_spread(per_worker),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if total:
        _write_json(out / "timing.json", timing)
    return timing


def _remeasure(
    client, spec: SweepSpec, plans: dict[str, dict], trained: dict, metrics: dict, out: Path, log: Log
) -> None:
    from pipeline.worker import remeasure_task

    path = out / "validation.json"
    validation = json.loads(path.read_text()) if path.is_file() else {}
    futures = {}
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
                spec.seed + 1,
                resources={cls: 1},
                pure=False,
                key=f"remeasure-{cls}-{time.time_ns()}",
            ),
        )
    for cls, (name, future) in futures.items():
        result = future.result()
        result.update(model=name, repeats=spec.validate.repeats)
        validation[cls] = result
        top, default = result["candidates"][0], result["default"]
        log(
            f"re-measured {cls}: predicted best {top.get('total_ms')} ms ({top['status']}), "
            f"default {default.get('total_ms')} ms"
        )
    _write_json(path, validation)


def _up_to_date(out: Path, plans: dict[str, dict]) -> bool:
    """True when the merged data is what the saved models were trained on and every class was re-measured."""
    from pipeline.shards import load_merged
    from pipeline.train import data_hash

    try:
        metrics = json.loads((out / "models" / "metrics.json").read_text())
        validation = json.loads((out / "validation.json").read_text())
    except (OSError, ValueError):
        return False
    return metrics.get("data_hash") == data_hash(load_merged(out)) and all(c in validation for c in plans)


def run_sweep(
    spec: SweepSpec,
    out: Path,
    cluster: str,
    classes: Sequence[str] | None,
    force: bool,
    workers_per_class: int = 1,
    log: Log = print,
    max_minutes: float | None = None,
) -> dict[str, Any]:
    """Everything ``python -m pipeline sweep`` does, in order; returns the report."""
    from pipeline.cluster import open_cluster
    from pipeline.report import build_report
    from pipeline.train import train_sweep

    out.mkdir(parents=True, exist_ok=True)
    check_previous(out, spec, force, classes, log)
    wanted = list(classes or spec.gpu_classes or []) or None
    with open_cluster(cluster, wanted, workers_per_class, out / ".dask", log) as handle:
        chosen = wanted or list(handle.gpu_classes)
        for cls in chosen:
            if cls not in handle.gpu_classes:
                raise UserError(
                    f"GPU class {cls!r} is not served by this cluster (it serves: "
                    f"{', '.join(handle.gpu_classes)})"
                )
        plans = {}
        for cls in chosen:
            redo = force and (not classes or cls in classes)
            if redo and classes:
                shutil.rmtree(shard_dir(out, cls), ignore_errors=True)
            plans[cls] = _plan_class(handle.client, spec, cls, out, replan=redo)
            log(
                f"plan {cls}: {len(plans[cls]['configs'])} configurations "
                f"on {plans[cls]['device']['device_name']}"
            )
        first = next(iter(plans.values()))
        _write_json(
            out / "sweep.json",
            {
                "spec": spec.to_dict(),
                "planning_key": spec.planning_key(),
                "plan": {k: first[k] for k in ("params", "values", "default", "kernels")},
                "updated": datetime.now(UTC).isoformat(timespec="seconds"),
            },
        )
        timing = _measure(handle.client, spec, plans, out, log, max_minutes, local=handle.kind == "local")
        if timing["batches"]:
            log(
                f"measured {timing['rows']} configurations in {timing['seconds']} s "
                f"({timing['samples_per_minute']} per minute)"
            )
        merged = merge(out)
        log(f"merged {merged.num_rows} rows from {len(list_shards(out))} shards into {out / 'merged'}")
        if _up_to_date(out, plans):
            log("nothing new since the last training: models and re-measurements kept")
        else:
            trained = train_sweep(out, log)
            _remeasure(handle.client, spec, plans, trained["models"], trained["metrics"], out, log)
    report = build_report(out, log)
    log(f"report: {out / 'report.md'}")
    return report
