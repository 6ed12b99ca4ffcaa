"""``--strategy kt:<name>`` on a ``kernel`` workload: Kernel Tuner 1.5's ``tune_kernel`` on the same source,
space, budget and card as our strategies, as a live baseline.

It runs on one worker of the class (Kernel Tuner's loop measures one configuration at a time), with the
kernel workload's own description (``KernelWorkload.kernel_tuner_arguments``: source, problem size,
arguments, constant memory, grid divisors, expected outputs) and the workload's space as its restriction;
``strategy_options={"max_fevals": budget}``; Python's and numpy's generators seeded with the sweep's seed;
its timing is its own (``iterations`` = the spec's ``repeats``). Every configuration it evaluated lands as a
row of one search shard (``shard-search-kt.parquet``: status ok, or failed with Kernel Tuner's reason), in
its order, so merge, train and the report read it like ours; the pick is then re-measured against the
default by our code (``search.remeasure_search_pick``), as ours is.

Resume is Kernel Tuner's own cache (``search/<class>.kt-cache.json``): the same command again replays what it
measured, and since its strategy draws from the same seed and sees the same values, measures only the rest.
"""

from __future__ import annotations

import json
import random
import time
import warnings
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from launchtune.kernels.atomic import atomic_path
from launchtune.kernels.workload import WorkloadError

from ..paths import assert_inside
from ..store.checksums import shard_metadata
from ..store.folder import SweepFolder
from ..store.journal import Journal
from ..store.schema import OBJECTIVE_COLUMN, kernel_column, plan_schema
from ..strategies.base import Answer, Session
from ..strategies.kernel_tuner_baseline import PREFIX
from .worker import fixed_columns, get_workload

SHARD = "search-kt"  # the one shard of a Kernel Tuner search


def kernel_tuner_task(
    spec: Mapping[str, Any],
    plan: Mapping[str, Any],
    gpu_class: str,
    strategy: str,
    budget: int,
    shard_path: str,
    cache_path: str,
    sweep_dir: str,
) -> dict[str, Any]:
    """On a worker of the class: ``tune_kernel`` with Kernel Tuner's ``strategy``, then its evaluations as
    one shard; returns them in its order (``answers``) and how many its cache held before."""
    import kernel_tuner
    from constraint import FunctionConstraint

    workload: Any
    workload, facts = get_workload(spec)
    if not type(workload).capabilities.kernel_spec:  # the kernel workload's own: its source and arguments
        raise WorkloadError(f"{PREFIX}{strategy}: Kernel Tuner runs a kernel workload's source only")
    arguments = workload.kernel_tuner_arguments()
    objective = workload.spec.objective
    space = workload.space()
    names = space.names

    def in_space(*values: Any) -> bool:  # Kernel Tuner's values (a float or text, not its index)
        return space.is_valid({n: workload.spec.index_of(n, v) for n, v in zip(names, values, strict=True)})

    cache = Path(cache_path)
    assert_inside(Path(sweep_dir), cache)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cached = _cached_entries(cache)
    random.seed(spec["seed"])
    np.random.seed(spec["seed"] % 2**32)  # Kernel Tuner's strategies draw from numpy's global generator
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = kernel_tuner.tune_kernel(
            **arguments,
            restrictions=[FunctionConstraint(in_space)],
            strategy=strategy,
            strategy_options={"max_fevals": int(budget)},
            iterations=int(spec["repeats"]),
            **_objective_arguments(workload),
            cache=str(cache),
            quiet=True,
            verbose=False,
        )
    seconds = time.perf_counter() - t0
    order = _evaluations(results, workload, names)[:budget]
    kernel = str(plan["kernels"][0]) if plan.get("kernels") else ""
    fixed = fixed_columns(spec, gpu_class, SHARD, facts)
    records = _shard_rows(order, plan, kernel, fixed, names, strategy)
    schema = plan_schema(plan, search=True)
    rows = [(k, "search", config) for k, (config, *_) in enumerate(order)]
    schema = schema.with_metadata({**schema.metadata, **shard_metadata(rows, names, spec["seed"])})
    path = assert_inside(Path(sweep_dir), Path(shard_path))
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pylist(records, schema=schema), tmp, compression="zstd")
    return {
        "answers": [{"config": c, "total_ms": t, "cost": cost} for c, t, _, cost, _ in order],
        "objective": objective.as_dict(),
        "cached": min(cached, len(order)),
        "seconds": seconds,
        "kernel": kernel,
    }


# One evaluation of Kernel Tuner's: (configuration as our indices, time in ms or None where it failed, why it
# failed, the objective's cost or None, the metrics)
Evaluation = tuple[dict[str, int], float | None, str, float | None, dict[str, Any]]


def _evaluations(results: list[dict[str, Any]], workload: Any, names: list[str]) -> list[Evaluation]:
    """Kernel Tuner's results in its order, each configuration once (its first evaluation), with the
    objective's cost as our kernel spec computes it; a time that is not a finite number, or a cost that is
    not, a failure."""
    order: list[Evaluation] = []
    seen = set()
    for r in results:
        config = {n: workload.spec.index_of(n, r[n]) for n in names}
        key = tuple(config.values())
        if key in seen:
            continue
        seen.add(key)
        t: Any = r.get("time")  # a number, or why Kernel Tuner has none
        ok = isinstance(t, int | float) and np.isfinite(t)
        metrics, cost = workload.spec.evaluate(config, workload.problem, {"time": float(t) if ok else None})
        ok = ok and np.isfinite(cost)
        order.append((config, float(t) if ok else None, "" if ok else str(t), cost if ok else None, metrics))
    return order


def _shard_rows(
    order: list[Evaluation],
    plan: Mapping[str, Any],
    kernel: str,
    fixed: Mapping[str, Any],
    names: list[str],
    strategy: str,
) -> list[dict[str, Any]]:
    """The evaluations as the shard's rows: one proposal per round, the time as ``kernel``'s (the other
    kernels' columns null), the objective's cost and measures where the plan states them."""
    records = []
    measures = plan.get("measures")
    for k, (config, t, reason, cost, metrics) in enumerate(order):
        rec = {
            **fixed,
            "sample_id": k,
            "sampler": "search",
            "status": "ok" if t is not None else "failed",
            "reason": reason,
            "verified": t is not None,  # Kernel Tuner compared its outputs with the answer
            "total_ms": t,
            "compile_ms": None,
            "timestamp": datetime.now(UTC),
            "strategy": PREFIX + strategy,
            "proposal_round": k,
            "proposal_order": k,
            **{n: config[n] for n in names},
        }
        for kk in plan["kernels"]:
            rec[kernel_column(kk)] = t if kk == kernel else None
        if measures is not None:
            rec[OBJECTIVE_COLUMN] = cost
            rec.update({m: metrics.get(m.removeprefix("metric.")) for m in measures})
        records.append(rec)
    return records


def _objective_arguments(workload: Any) -> dict[str, Any]:
    """``tune_kernel``'s ``metrics``, ``objective`` and ``objective_higher_is_better`` for the spec's: each
    metric as a function of Kernel Tuner's result dict (the parameters, ``time`` in ms) evaluating the same
    expression, so both tools rank by the same number. Energy is not Kernel Tuner's here (it would need its
    NVML observer): an objective reading it is one line."""
    from collections import OrderedDict

    spec = workload.spec
    if spec.objective.is_time and not spec.metrics:
        return {}
    if spec.needs_energy:
        raise WorkloadError(
            f"{PREFIX}: the objective {spec.objective.describe()} reads energy, which the Kernel Tuner "
            "baseline does not measure here"
        )
    metrics: OrderedDict[str, Any] = OrderedDict()
    for name, _ in spec.metrics:

        def metric(p: Mapping[str, Any], name: str = name) -> float:
            config = {n: int(p[n]) for n in spec.names}
            values, _ = spec.evaluate(config, workload.problem, {"time": float(p["time"])})
            value = values.get(name)
            return float("nan") if value is None else value

        metrics[name] = metric
    out: dict[str, Any] = {
        "objective": spec.objective.name,
        "objective_higher_is_better": spec.objective.maximize,
    }
    if metrics:
        out["metrics"] = metrics
    return out


def _cached_entries(cache: Path) -> int:
    """Configurations a Kernel Tuner cache file already holds (0 where there is none or it is unreadable)."""
    try:
        text = cache.read_text().rstrip().rstrip(",")
        if not text.endswith("}"):
            text += "}}"  # Kernel Tuner leaves its cache open while it appends
        return len(json.loads(text).get("cache", {}))
    except (OSError, ValueError):
        return 0


class RecordedAnswers:
    """Answers known before they are asked (Kernel Tuner measured them): one at a time, in its order."""

    width = 1

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self._ready: list[Answer] = []

    def submit(self, order: int, config: Any, round: int) -> None:
        self._ready.append(self.answers[order])

    def collect(self, event: int, block: bool) -> list[Answer]:
        ready, self._ready = self._ready, []
        return ready

    def recorded(self, event: int) -> bool:
        return False


def kernel_tuner_search(
    client: Any,
    spec: Any,
    cls: str,
    plan: Mapping[str, Any],
    out: Path,
    session_of: Any,
    log: Any,
    limit: float,
) -> tuple[Session, int, int, float]:
    """Kernel Tuner's search of class ``cls`` on one of its workers; the session its evaluations make (for
    the pick and its re-measure), how many its cache answered, how many it measured, and its seconds."""
    from ..cluster.waits import result

    folder = SweepFolder(out)
    name = spec.search.strategy[len(PREFIX) :]
    plan_min = {
        "params": plan["params"],
        "kernels": plan["kernels"],
        **{k: plan[k] for k in ("measures", "objective") if k in plan},
    }
    future = client.submit(
        kernel_tuner_task,
        spec.to_dict(),
        plan_min,
        cls,
        name,
        spec.search.budget,
        str(folder.shard_path(cls, SHARD)),
        str(folder.search_journal(cls).with_suffix(".kt-cache.json")),
        str(out),
        resources={cls: 1},
        pure=False,
        key=f"search-kt-{cls}-{time.time_ns()}",
    )
    done = result(future, f"Kernel Tuner's search of class {cls}", limit)
    kernel = done["kernel"]
    answers = [  # the objective's cost, as our strategies see it; per-kernel times only where that is time
        Answer(
            k,
            float("inf") if a["cost"] is None else float(a["cost"]),
            {kernel: a["total_ms"]} if done["objective"] == {"minimize": "time"} else {},
        )
        for k, a in enumerate(done["answers"])
    ]
    session = session_of(RecordedAnswers(answers))
    for a in done["answers"]:
        session.measure(a["config"])
    session.settle()
    Journal(folder.search_journal(cls)).rewrite([(k, k) for k in range(len(answers))])
    log(
        f"search {cls}: Kernel Tuner's {name} evaluated {len(answers)} configurations "
        f"({done['cached']} from its cache)"
    )
    return session, int(done["cached"]), len(answers) - int(done["cached"]), float(done["seconds"])
