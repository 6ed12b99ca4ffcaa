"""The one declared Parquet schema of a shard (and so of the merged data).

Fixed columns first (who, where, what, how it went), then one int64 column per launch parameter (named as
in the
workload's space, e.g. ``xi_flux.blocks``) and one float64 column per kernel time (``ms.<kernel>``). The
parameter
and kernel lists come from the workload, so a sweep's schema is fixed the moment its plan is made.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def shard_schema(params: Sequence[str], kernels: Sequence[str], search: bool = False) -> pa.Schema:
    """The schema of each shard of a sweep whose space has ``params``, whose workload times ``kernels``
    (``search``: a search's shards, with ``SEARCH_FIELDS`` last)."""
    fields = list(FIXED_FIELDS)
    fields += [pa.field(p, pa.int64()) for p in params]
    fields += [pa.field(kernel_column(k), pa.float64()) for k in kernels]
    fields += SEARCH_FIELDS if search else []
    return pa.schema(fields, metadata={b"launchtune.schema": b"shard/1"})


def kernel_params(params: Sequence[str]) -> dict[str, list[str]]:
    """Group parameters by kernel: ``xi_flux.blocks`` belongs to kernel ``xi_flux``; ``streams`` to itself."""
    groups: dict[str, list[str]] = {}
    for p in params:
        groups.setdefault(p.split(".", 1)[0], []).append(p)
    return groups
