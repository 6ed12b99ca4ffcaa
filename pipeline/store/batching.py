"""Which configurations go into which batch (one task, one shard), and in which order they are measured.

Batch names are stable (a rerun finds its shards whatever the number of workers); per-kernel grids first; the
last batches cut into parts so several cards of a class finish together.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def batches(configs: Sequence[tuple[str, dict[str, int] | None]], size: int) -> list[tuple[str, list]]:
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


def measure_order(configs: Sequence[tuple[str, dict[str, int] | None]], size: int) -> list[tuple[str, list]]:
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


def suggest_batch_size(
    samples: int,
    workers: int,
    sample_s: float,
    task_cost_s: float = 0.015,
    max_share: float = 0.02,
    min_batches_per_worker: int = 8,
    scheduler_share: float = 0.5,
) -> int:
    """A batch size for ``samples`` over ``workers`` whose samples take ``sample_s`` each.

    Large enough that a task's fixed cost (``task_cost_s``: the scheduler's and the client's CPU per task
    plus the shard write; 10-16 ms measured in the scale rehearsal on 2 loaded cores,
    data/rehearsal/cpu/scale/) is at most ``max_share`` of the batch's measuring time, and that the one
    scheduler, finishing ``workers / (batch x sample_s)`` tasks a second, is busy at most
    ``scheduler_share`` of its time; small enough that each worker still gets ``min_batches_per_worker``
    batches, so a lost worker or the last batch costs at most that fraction of a worker's share. Where they
    disagree, balance wins. The spec's ``batch_size`` stays the one in force (batch names must not move
    between reruns); this is the number to put there.
    """
    if samples < 1 or workers < 1 or sample_s <= 0:
        raise ValueError("suggest_batch_size: samples, workers and sample_s must be positive")
    for_overhead = max(
        math.ceil(task_cost_s / (max_share * sample_s)),
        math.ceil(workers * task_cost_s / (scheduler_share * sample_s)),
    )
    for_balance = samples // (workers * min_batches_per_worker)
    return max(1, min(for_overhead, for_balance))


def auto_batch_size(plans: Mapping[str, Mapping[str, Any]], workers: Mapping[str, int]) -> int:
    """The batch size a spec's ``batch_size: auto`` stands for: :func:`suggest_batch_size` per class (its
    planned samples, its workers now, the seconds a sample took when its planning worker timed a few,
    ``probe_s``), the smallest of them (one size for every class: balance first)."""
    sizes = []
    for cls, plan in plans.items():
        probe = float(plan.get("probe_s") or 0)
        if probe <= 0 or not plan.get("configs"):
            continue
        sizes.append(suggest_batch_size(len(plan["configs"]), max(1, workers.get(cls, 1)), probe))
    return min(sizes) if sizes else 25
