"""What runs on a Dask worker: build the workload once, plan, measure batches into shards, re-measure winners.

Every function here takes plain data (dicts, lists, paths) and returns plain data, so the scheduler can
retry a task on another worker after one dies. A configuration that breaks (launch failure, wrong answer)
becomes a row with a status and a reason; it never takes the worker down. Re-measuring a pick against the
default is ``sweep/remeasure.py``.
"""

from __future__ import annotations

import json
import math
import os
import platform
import socket
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from launchtune.kernels.atomic import atomic_path
from launchtune.kernels.backend import get_backend, gpu_count
from launchtune.kernels.device import describe_device, measure_copy_bandwidth
from launchtune.kernels.objective import cost_of
from launchtune.kernels.workload import Workload, WorkloadError

from ..errors import PERMANENT_ERRNOS
from ..paths import assert_inside
from ..store.checksums import rows_digest, shard_metadata
from ..store.schema import (
    OBJECTIVE_COLUMN,
    kernel_column,
    kernel_params,
    plan_schema,
)
from ..store.shards import Planned, read_shard, set_aside, shard_problem
from ..store.workloads import make_workload
from ..version import __version__

# One workload per worker process and spec: preparing a CFD grid and compiling its kernels costs seconds, a
# batch should not pay it again. Keyed by the fields that define the workload.
_CACHE: dict[str, tuple[Workload, dict[str, Any]]] = {}


# The last spec's key: a batch asks for its workload once per row, and the key (a sorted JSON dump) cost
# about 30 us a row, an eighth of a replayed row's CPU (issue 18). Kept by identity: a task's spec is one
# dict.
_LAST_KEY: list[Any] = [None, ""]


def _workload_key(spec: Mapping[str, Any]) -> str:
    if _LAST_KEY[0] is spec:
        return str(_LAST_KEY[1])
    keys = ("workload", "case", "size", "backend", "options")
    key = json.dumps({k: spec[k] for k in keys}, sort_keys=True, default=str)
    _LAST_KEY[:] = [spec, key]
    return key


def build_workload(spec: Mapping[str, Any]) -> Workload:
    """The workload a spec names, built by the registry (``pipeline.store.workloads.make_workload``): a
    registered name or one's own ``module:factory``. Whether the spec may name it was decided before the
    cluster started (``workloads.check_workload``)."""
    options = spec.get("options") or {}
    return make_workload(spec["workload"], spec["case"], spec["size"], spec["backend"], **options)


# The facts of each device this process measures on, by backend and device index: read and its bandwidth
# measured once per process, not once per workload (the Python API builds a workload per ``tune_kernel``
# call, and Kernel Tuner's ``reduction`` makes twelve calls; on the CPU the bandwidth copy took 0.27 s).
_FACTS: dict[tuple[str, int], dict[str, Any]] = {}
_BANDWIDTH: dict[tuple[str, int], float] = {}


def device_facts(backend_name: str, probe: bool = True) -> dict[str, Any]:
    """The facts of the device a ``backend_name`` workload runs on here, with its measured copy bandwidth
    (``probe``; None without: a workload whose answers are recorded, ``Capabilities.recorded``)."""
    backend = get_backend(backend_name)
    key = (backend.name, int(backend.xp.cuda.Device().id) if backend.is_gpu else 0)
    if key not in _FACTS:
        _FACTS[key] = describe_device(backend)
    if probe and key not in _BANDWIDTH:
        _BANDWIDTH[key] = round(measure_copy_bandwidth(backend), 1)
    return {**_FACTS[key], "measured_bandwidth_gbs": _BANDWIDTH.get(key) if probe else None}


def get_workload(spec: Mapping[str, Any]) -> tuple[Workload, dict[str, Any]]:
    """The cached workload for ``spec`` plus the facts of the device it runs on."""
    key = _workload_key(spec)
    if key not in _CACHE:
        workload = build_workload(spec)
        _CACHE[key] = (
            workload,
            device_facts(spec["backend"], probe=not type(workload).capabilities.recorded),
        )
    return _CACHE[key]


def forget_workload(spec: Mapping[str, Any]) -> None:
    """Drop a workload after a failure: a context poisoned by a bad launch must not fail every later row."""
    _CACHE.pop(_workload_key(spec), None)


def forget_workloads_of(spec_path: str | Path) -> None:
    """Drop the workloads built in this process from the kernel spec at ``spec_path`` (``options.spec``):
    the Python API's call has ended, and what it handed them (its device arrays, its functions) goes with
    it."""
    target = Path(spec_path).resolve()
    for key in list(_CACHE):
        spec = (json.loads(key).get("options") or {}).get("spec")
        if isinstance(spec, str) and Path(spec).resolve() == target:
            close = getattr(_CACHE.pop(key)[0], "close", None)
            if close is not None:  # its compile pool's threads end with it
                close()


def _kernels_of(workload: Workload, params: list[str]) -> list[str]:
    info = workload.describe()
    described = info.get("kernels") or info.get("kernel_names")
    if described:
        return [str(k) for k in described]
    return [k for k, ps in kernel_params(params).items() if any("." in p for p in ps)]


def _objective_facts(workload: Workload) -> dict[str, Any]:
    """What a workload that states its objective adds to its plan: the objective and its measures' columns
    (``schema.shard_schema``); nothing for one that does not (time is its objective)."""
    info = workload.describe()
    if "measures" not in info:
        return {}
    return {"measures": [str(m) for m in info["measures"]], "objective": dict(info.get("objective") or {})}


def plan_task(spec: Mapping[str, Any], samplers: list[str], samples: int, seed: int) -> dict[str, Any]:
    """Draw the configurations to measure, on a worker of the class (constraints may depend on the device)."""
    workload, facts = get_workload(spec)
    workload.check_default()  # a default that cannot run stops the sweep with one line, exit 2
    space = workload.space()
    params = space.names
    out: dict[str, Any] = {
        "params": params,
        "values": {p.name: list(p.values) for p in space.params},
        "default": space.default,
        "kernels": _kernels_of(workload, params),
        **_objective_facts(workload),
        "device": facts,
        "configs": [],  # (sampler, config) in sample-id order
    }
    if "random" in samplers:
        out["configs"] += [("random", c) for c in space.sample(samples, seed)]
    if "exhaustive" in samplers:
        if space.cardinality > EXHAUSTIVE_LIMIT:
            raise WorkloadError(
                f"the exhaustive sampler over {space.cardinality:,} configurations (at most "
                f"{EXHAUSTIVE_LIMIT:,}): use random samples",
                field="samplers",
            )
        out["configs"] += [("exhaustive", c) for c in space.grid()]
    if "per_kernel_exhaustive" in samplers:
        for names in kernel_params(params).values():
            for sub in space.subspace(names).grid():
                out["configs"].append(("per_kernel_exhaustive", {**space.default, **sub}))
    if space.inactive:  # parameters some configurations do not use: the models zero them (ZeroInactive)
        out["inactive"] = [rule.as_list() for rule in space.inactive]
    if spec.get("batch_size") == "auto" and out["configs"]:
        probed = [c for _, c in out["configs"][:PROBE_SAMPLES]]
        workload.compile_ahead(probed)  # compiled side by side, not one after another on the probe's clock
        out["probe_s"] = probe_seconds(spec, probed)
    return out


# The product of the value lists the exhaustive sampler walks at most (it tests each against the constraints).
EXHAUSTIVE_LIMIT = 10_000_000


def compile_task(spec: Mapping[str, Any], configs: list[dict[str, int]]) -> int:
    """On a worker: start compiling ``configs`` (a search's next proposals, ``Session.announce``) on its
    workload's compile pool, so they compile while the first ones are measured; how many were new."""
    workload, _ = get_workload(spec)
    return workload.compile_ahead(configs)


def search_plan_task(spec: Mapping[str, Any], seed: int, pool_limit: int) -> dict[str, Any]:
    """A search's plan, on a worker of the class: the space's facts and the candidate pool its strategy
    chooses from, as a ``strategies.base.Session`` draws it (the workload's own ``candidates()`` where it
    has them, a recorded dataset's rows; else every valid configuration up to ``pool_limit``, else a seeded
    sample of that many), since the constraints are the device's."""
    workload, facts = get_workload(spec)
    workload.check_default()  # a default that cannot run stops the sweep with one line, exit 2
    space = workload.space()
    params = space.names
    fixed = workload.candidates()
    if fixed is not None:
        configs = fixed
    elif space.cardinality <= pool_limit:
        configs = list(space.grid())
    else:
        configs = space.sample(pool_limit, seed)
    out: dict[str, Any] = {
        "params": params,
        "values": {p.name: list(p.values) for p in space.params},
        "default": space.default,
        "kernels": _kernels_of(workload, params),
        **_objective_facts(workload),
        "device": facts,
        "pool": np.array([[c[n] for n in params] for c in configs], dtype=np.int64).reshape(-1, len(params)),
    }
    if space.inactive:
        out["inactive"] = [rule.as_list() for rule in space.inactive]
    return out


# Samples the planning worker times for ``batch_size: auto`` (their rows are not kept: they are measured
# again in their batches).
PROBE_SAMPLES = 3


def probe_seconds(spec: Mapping[str, Any], configs: list[dict[str, int]]) -> float:
    """Median wall seconds of measuring each of ``configs`` as a batch would (check, time, repeats)."""
    took = []
    for config in configs:
        t0 = time.perf_counter()
        measure_one(spec, config, spec["repeats"], spec["check"])
        took.append(time.perf_counter() - t0)
    return float(np.median(took))


def _versions(facts: Mapping[str, Any]) -> str:

    return json.dumps(
        {
            "python": platform.python_version(),
            "numpy": facts.get("numpy_version", ""),
            "cupy": facts.get("cupy_version", ""),
            "cuda_runtime": facts.get("cuda_runtime", 0),
            "cuda_driver": facts.get("cuda_driver", 0),
            "pipeline": __version__,
        },
        sort_keys=True,
    )


_NAMED: list[str] = []  # the name of this process's worker where it measures in-process (``cluster.inline``)


@contextmanager
def name_this_worker(name: str) -> Iterator[None]:
    """Rows measured in this process meanwhile name ``name``, the local cluster's one worker would be."""
    _NAMED.append(name)
    try:
        yield
    finally:
        _NAMED.pop()


def worker_name() -> str:
    if _NAMED:
        return _NAMED[-1]
    try:
        from distributed import get_worker  # a Dask worker's (imported on Dask's path only)

        return str(get_worker().name)
    except (ImportError, ValueError):
        return f"pid{os.getpid()}"


def measure_one(
    spec: Mapping[str, Any], config: Mapping[str, int], repeats: int, check: bool
) -> dict[str, Any]:
    """Check then time one configuration; any exception becomes status ``failed`` with its reason."""
    try:
        workload, _ = get_workload(spec)
        space = workload.space()
        problems = space.violations(config)
        if problems:
            return {"status": "invalid", "reason": "; ".join(problems), "verified": False}
        config = {n: int(config[n]) for n in space.names}  # space.validate, without checking twice
        verified = False
        if check:
            result = workload.check(config)
            if not result.ok:
                return {
                    "status": "invalid",
                    "reason": result.reason or "check failed",
                    "verified": False,
                    "compile_ms": _compile_ms(workload),
                }
            verified = True
        timing = workload.run(config, repeats)
        cost = cost_of(timing)
        measures = {f"metric.{k}": v for k, v in (timing.extra.get("metrics") or {}).items()}
        measures.update({k: timing.extra[k] for k in ("energy_mJ", "power_W") if k in timing.extra})
        out = {
            "status": "ok",
            "reason": str(timing.extra.get("energy_reason", "")),  # an ok row says why it has no energy
            "verified": verified,
            "total_ms": float(timing.total),
            "objective": cost,
            "measures": measures,
            "kernels": {k: float(v) for k, v in timing.kernels.items()},
            "compile_ms": _compile_ms(workload, timing.extra.get("compile_ms")),
        }
        if not math.isfinite(cost):  # a maximised metric of 0, a metric dividing by zero: nothing to rank
            objective = workload.describe().get("objective") or {}
            what = " ".join(f"{k} {v}" for k, v in objective.items()) or "the objective"
            out.update(status="failed", reason=f"{what}: no value for this configuration", objective=None)
        return out
    except Exception as exc:  # a launch failure is data, not a crash
        # A CUDA context may be poisoned by a bad launch, so the workload is rebuilt, unless it says its
        # failures leave it sound (``keeps_state_on_failure``: the replay workload, whose rebuild would cost a
        # second per injected failure and nothing a real card pays differently).
        if not getattr(_CACHE.get(_workload_key(spec), (None,))[0], "keeps_state_on_failure", False):
            forget_workload(spec)
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        return {"status": "failed", "reason": reason, "verified": False}


def _compile_ms(workload: Workload, reported: float | None = None) -> float | None:
    """Compile time a workload spent on this row's configuration (kernels with compile-time constants compile
    once per process, outside the timed region); None for workloads that never compile per configuration."""
    if reported is not None:
        return float(reported)
    taken = workload.take_compile_ms()
    return float(taken) if taken is not None else None


def fixed_columns(
    spec: Mapping[str, Any], gpu_class: str, batch: str, facts: Mapping[str, Any]
) -> dict[str, Any]:
    """The columns every row of a shard shares: the sweep, the batch, the card and where it ran."""
    return {
        "sweep_id": spec["name"],
        "batch": batch,
        "workload": spec["workload"],
        "case": spec["case"],
        "size": spec["size"],
        "backend": facts["backend"],
        "gpu_class": gpu_class,
        "device_class": facts["gpu_class"],
        "device_name": facts["device_name"],
        "sm_count": facts["sm_count"],
        "peak_fp64_gflops": facts["peak_fp64_gflops"],
        "spec_bandwidth_gbs": facts["spec_bandwidth_gbs"],
        "spec_memory_gb": facts["spec_memory_gb"],
        "measured_bandwidth_gbs": facts["measured_bandwidth_gbs"],
        "cuda_visible_devices": facts["cuda_visible_devices"],
        "pci_bus_id": facts["pci_bus_id"],
        "repeats": spec["repeats"],
        "host": socket.gethostname(),
        "worker": worker_name(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm_partition": os.environ.get("SLURM_JOB_PARTITION"),
        "seed": spec["seed"],
        "versions": _versions(facts),
    }


def measure_batch(
    spec: Mapping[str, Any],
    plan: Mapping[str, Any],
    gpu_class: str,
    batch: str,
    rows: list[tuple[int, str, dict[str, int]]],
    shard_path: str,
    sweep_dir: str,
    extra: Mapping[int, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Measure ``rows`` (sample id, sampler, config) and write them as one shard, atomically.

    A search's batch (``plan["search"]``) writes the search's columns (``extra``, per sample id) and answers
    each row's status and times too (``answers``), for the strategy waiting for them."""
    # wall clock, comparable across workers (which card was busy when); not a kernel time
    started = time.time()
    path = assert_inside(Path(sweep_dir), Path(shard_path))
    params, kernels = plan["params"], plan["kernels"]
    measures = plan.get("measures")
    search = bool(plan.get("search"))
    schema = plan_schema(plan, search=search)
    note = None
    planned = (Planned(list(params), spec["seed"]), rows_digest(rows, params, spec["seed"]))
    if path.exists():
        problem = shard_problem(path, [r[0] for r in rows], schema, planned)
        if problem is None:
            # Dask re-runs a finished task whose result lived on a worker that was lost; its shard is already
            # on disk, so report it instead of measuring the batch again.
            status = read_shard(path).column("status").to_pylist()
            counts = {s: status.count(s) for s in ("ok", "invalid", "failed")}
            return {
                **({"answers": shard_answers(path, kernels, measures is not None)} if search else {}),
                "batch": batch,
                "gpu_class": gpu_class,
                "rows": len(status),
                **counts,
                "worker": worker_name(),
                "started": started,
                "finished": started,
                "measured": False,
            }
        try:
            set_aside(path, problem)
        except OSError as exc:
            if is_permanent(exc):
                return _fatal(batch, gpu_class, path, exc)
            raise
        note = f"{path}: {problem}; set aside, its batch measured again"
    workload, facts = get_workload(spec)
    # a workload that compiles per configuration starts on the batch's ones now
    workload.compile_ahead([config for _, _, config in rows])
    fixed = fixed_columns(spec, gpu_class, batch, facts)
    records = []
    for sample_id, sampler, config in rows:
        m = measure_one(spec, config, spec["repeats"], spec["check"])
        _, facts = get_workload(spec)  # rebuilt if the last row failed
        rec = {
            **fixed,
            "sample_id": sample_id,
            "sampler": sampler,
            "status": m["status"],
            "reason": m["reason"],
            "verified": m["verified"],
            "total_ms": m.get("total_ms"),
            "compile_ms": m.get("compile_ms"),
            "timestamp": datetime.now(UTC),
        }
        rec.update({p: int(config[p]) if p in config else None for p in params})
        times = m.get("kernels", {})
        rec.update({kernel_column(k): times.get(k) for k in kernels})
        if measures is not None:
            rec[OBJECTIVE_COLUMN] = m.get("objective")
            rec.update({c: (m.get("measures") or {}).get(c) for c in measures})
        if search:
            rec.update((extra or {}).get(sample_id, {}))
        records.append(rec)
    # rows that do not fit the plan's schema fail alike on every retry: reported like a read-only folder
    try:
        # the digest of the configurations and the seed, so a rerun can tell this shard from another plan's
        table = pa.Table.from_pylist(
            records,
            schema=schema.with_metadata({**schema.metadata, **shard_metadata(rows, params, spec["seed"])}),
        )
    except (pa.ArrowException, OverflowError) as exc:
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        fatal = f"cannot write {path}: not the plan's schema ({why})"
        return {"batch": batch, "gpu_class": gpu_class, "fatal": fatal}
    try:
        with atomic_path(path) as tmp:  # a killed worker leaves a stray .tmp, never a half shard
            pq.write_table(table, tmp, **shard_options(len(records)))
    except OSError as exc:
        if is_permanent(exc):  # a retry (Dask's, on this or another worker) would fail the same way
            return _fatal(batch, gpu_class, path, exc)
        raise
    counts = {s: sum(r["status"] == s for r in records) for s in ("ok", "invalid", "failed")}
    return {
        **({"answers": [_answer(r, kernels, measures is not None) for r in records]} if search else {}),
        "batch": batch,
        "gpu_class": gpu_class,
        "rows": len(records),
        **counts,
        "worker": worker_name(),
        "started": started,
        "finished": time.time(),
        "measured": True,
        **({"note": note} if note else {}),
    }


def shard_options(rows: int) -> dict[str, Any]:
    """How a shard is written: zstd, dictionary pages and column statistics, but none of them for a single
    row (a search's proposal): a one-row column compresses to nothing, its dictionary is the value again and
    its statistics are the value twice, and on the replay workload's 64 columns they took a shard from
    1.4 ms of host CPU to 4 (zstd's per-column set-up alone 2 ms; issue 53). The merged table has them all."""
    batch = rows > 1
    return {"compression": "zstd" if batch else "none", "use_dictionary": batch, "write_statistics": batch}


def _answer(row: Mapping[str, Any], kernels: list[str], objective: bool = False) -> dict[str, Any]:
    """A measured row as a search's strategy sees it: its cost (the objective's where the workload states
    one, else its time; None unless it ran) and its kernels' times (only where the cost is the time, since
    a strategy may add them up)."""
    value = row[OBJECTIVE_COLUMN] if objective else row["total_ms"]
    ok = row["status"] == "ok" and value is not None
    per_kernel = ok and not objective
    return {
        "sample_id": int(row["sample_id"]),
        "total_ms": float(value) if ok else None,
        "kernels": {
            k: row[kernel_column(k)] for k in kernels if per_kernel and row[kernel_column(k)] is not None
        },
    }


def shard_answers(path: Path, kernels: list[str], objective: bool = False) -> list[dict[str, Any]]:
    """The answers a search's shard holds (:func:`_answer` of each row): a shard already on disk answers
    its proposal again without measuring it (a resumed search, a task Dask ran twice)."""
    columns = ["sample_id", "status", "total_ms", *map(kernel_column, kernels)]
    table = pq.read_table(path, columns=columns + ([OBJECTIVE_COLUMN] if objective else []))
    return [_answer(row, kernels, objective) for row in table.to_pylist()]


# Write errors that no retry fixes (``PERMANENT_ERRNOS``: not writable, read-only, full). Any other OSError
# (a network file system hiccup) is raised, and Dask retries the batch.


def is_permanent(exc: BaseException) -> bool:
    return isinstance(exc, PermissionError) or (isinstance(exc, OSError) and exc.errno in PERMANENT_ERRNOS)


def _fatal(batch: str, gpu_class: str, path: Path, exc: OSError) -> dict[str, Any]:
    """A batch that cannot be written: returned, not raised (Dask would retry it), for the sweep to stop."""
    why = os.strerror(exc.errno) if exc.errno else str(exc) or type(exc).__name__
    return {"batch": batch, "gpu_class": gpu_class, "fatal": f"cannot write {path}: {why}"}


def warm_task(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Build the workload on this worker before the sweep's clock starts, and say which card it is on.

    Only the worker that planned a class has its workload built; without this, every other worker of the
    class would pay the build (grid, compile, reference state, copy bandwidth) inside its first batch, which
    counts against the measured samples per second and delays that card. The answer names the card, so the
    log shows each worker's device, PCI bus id and copy bandwidth, and any worker that sees more than one GPU.
    """

    _, facts = get_workload(spec)
    keys = ("device_name", "gpu_class", "pci_bus_id", "cuda_visible_devices", "measured_bandwidth_gbs")
    return {
        "worker": worker_name(),
        "host": socket.gethostname(),
        "visible_gpus": gpu_count() if facts["backend"] == "cupy" else 0,
        **{k: facts[k] for k in keys},
    }
