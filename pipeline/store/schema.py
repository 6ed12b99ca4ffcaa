"""The one declared Parquet schema of a shard (and so of the merged data).

Fixed columns first (who, where, what, how it went), then one int64 column per launch parameter (named as
in the
workload's space, e.g. ``xi_flux.blocks``) and one float64 column per kernel time (``ms.<kernel>``). The
parameter
and kernel lists come from the workload, so a sweep's schema is fixed the moment its plan is made.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

KERNEL_PREFIX = "ms."

FIXED_FIELDS: list[pa.Field] = [
    pa.field("sweep_id", pa.string()),
    pa.field("sample_id", pa.int64()),
    pa.field("sampler", pa.string()),
    pa.field("batch", pa.string()),
    pa.field("workload", pa.string()),
    pa.field("case", pa.string()),
    pa.field("size", pa.string()),
    pa.field("backend", pa.string()),
    pa.field("gpu_class", pa.string()),  # the class the batch was routed to
    pa.field("device_class", pa.string()),  # the class detected on the worker (they differ only by mistake)
    pa.field("device_name", pa.string()),
    pa.field("sm_count", pa.int64()),
    pa.field("peak_fp64_gflops", pa.float64()),
    pa.field("spec_bandwidth_gbs", pa.float64()),
    pa.field("spec_memory_gb", pa.float64()),
    pa.field("measured_bandwidth_gbs", pa.float64()),  # copy bandwidth measured on the worker at start
    pa.field("cuda_visible_devices", pa.string()),
    pa.field("pci_bus_id", pa.string()),  # with host and worker: which card of a node measured the row
    pa.field("status", pa.string()),
    pa.field("reason", pa.string()),
    pa.field("verified", pa.bool_()),
    pa.field("repeats", pa.int64()),
    pa.field("total_ms", pa.float64()),
    # compiling (or loading) kernels this row needed first, outside the measured time; null where nothing
    # compiles
    pa.field("compile_ms", pa.float64()),
    pa.field("host", pa.string()),
    pa.field("worker", pa.string()),
    pa.field("slurm_job_id", pa.string()),
    pa.field("slurm_partition", pa.string()),
    pa.field("seed", pa.int64()),
    pa.field("versions", pa.string()),  # JSON: python, numpy, cupy, CUDA runtime/driver, pipeline
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
]


# A search's shards (``launchtune sweep --strategy``) carry three more columns: the strategy that
# chose the row, the delivery point its proposal followed (proposals of one round were chosen on the same
# answers) and its proposal order (also its sample id). The order answers reached the strategy is the
# folder's search journal (``launchtune.pipeline.sweep.search``), since a worker writes its shard before that.
SEARCH_FIELDS: list[pa.Field] = [
    pa.field("strategy", pa.string()),
    pa.field("proposal_round", pa.int64()),
    pa.field("proposal_order", pa.int64()),
]


def kernel_column(kernel: str) -> str:
    return KERNEL_PREFIX + kernel


# A workload that states its objective (the ``kernel`` workload: ``kernels.objective``) adds the objective's
# cost (lower is better; what every ranking reads, ``total_ms`` where absent) and its measures (each metric
# as ``metric.<name>``, ``energy_mJ``, ``power_W``) after the kernel times; the objective itself is in the
# schema's metadata, so merged data says what its ``objective`` column is.
OBJECTIVE_COLUMN = "objective"
OBJECTIVE_META = b"launchtune.objective"


def shard_schema(
    params: Sequence[str],
    kernels: Sequence[str],
    search: bool = False,
    measures: Sequence[str] | None = None,
    objective: Mapping[str, str] | None = None,
) -> pa.Schema:
    """The schema of each shard of a sweep whose space has ``params``, whose workload times ``kernels``
    (``search``: a search's shards, with ``SEARCH_FIELDS`` last; ``measures``: the objective column and
    these, where the workload states an objective)."""
    fields = list(FIXED_FIELDS)
    fields += [pa.field(p, pa.int64()) for p in params]
    fields += [pa.field(kernel_column(k), pa.float64()) for k in kernels]
    meta = {b"launchtune.schema": b"shard/1"}
    if measures is not None:
        fields += [pa.field(OBJECTIVE_COLUMN, pa.float64())]
        fields += [pa.field(m, pa.float64()) for m in measures]
        meta[OBJECTIVE_META] = json.dumps(dict(objective or {"minimize": "time"})).encode()
    fields += SEARCH_FIELDS if search else []
    return pa.schema(fields, metadata=meta)


def plan_schema(plan: Mapping[str, Any], search: bool | None = None) -> pa.Schema:
    """:func:`shard_schema` of a plan (``search`` None: whether the plan is a search's)."""
    return shard_schema(
        plan["params"],
        plan["kernels"],
        search="search" in plan if search is None else search,
        measures=plan.get("measures"),
        objective=plan.get("objective"),
    )


def kernel_params(params: Sequence[str]) -> dict[str, list[str]]:
    """Group parameters by kernel: ``xi_flux.blocks`` belongs to kernel ``xi_flux``; ``streams`` to itself."""
    groups: dict[str, list[str]] = {}
    for p in params:
        groups.setdefault(p.split(".", 1)[0], []).append(p)
    return groups


def cost_column(columns: Sequence[str]) -> str:
    """The column every ranking reads: the objective's cost where the rows have one, else the total time."""
    return OBJECTIVE_COLUMN if OBJECTIVE_COLUMN in columns else "total_ms"


def objective_of(meta: Mapping[bytes, bytes] | Mapping[str, Any] | None) -> Any:
    """The ``kernels.objective.Objective`` a schema's metadata (or a plan's facts) states; time where none."""
    from launchtune.kernels.objective import from_dict

    if not meta:
        return from_dict(None)
    raw = meta.get(OBJECTIVE_META) if OBJECTIVE_META in meta else meta.get("objective")  # type: ignore[call-overload]
    if isinstance(raw, bytes):
        raw = json.loads(raw)
    try:
        return from_dict(raw)
    except ValueError:
        return from_dict(None)
