"""The surrogate's pick, restricted to configurations that can run (issue 16).

A surrogate predicts a time for any point of the space, also for points that cannot run: on the H100 the
fused sweep's model ranked first a 128x8 block whose compiled variant allows 640 threads (96 registers), a
row the sweep itself had recorded as invalid. The pick therefore skips, in prediction order, (1) every
configuration the merged data recorded as ``invalid`` or ``failed`` on this class (``known_failures``), (2)
every one the space's constraints reject (on a GPU these include the compiled variants' register limits),
and, on the worker, (3) every one that fails its check or its run when re-measured (``remeasure_task``
measures down the ranking until ``top_k`` ran). ``predicted_pick`` is the same rule on recorded rows, for a
replay without a device.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..store.schema import cost_column

FAILED_STATUSES = ("invalid", "failed")
# How many candidates the re-measure may find unrunnable before it stops looking (per wanted pick): the
# space's constraints keep the known rules out, so a long run of failures means the check rejects them.
MAX_REJECTED_PER_PICK = 4

Key = tuple[int | None, ...]  # None: a parameter the configuration leaves unused (Space.active_key)


def config_key(config: Mapping[str, Any], names: Sequence[str]) -> Key:
    return tuple(int(config[n]) for n in names)


def known_failures(frame: pd.DataFrame, gpu_class: str | None, params: Sequence[str]) -> list[dict[str, int]]:
    """The distinct configurations of ``gpu_class`` (every class where None) recorded as invalid or failed."""
    rows = frame[frame["status"].isin(FAILED_STATUSES)]
    if gpu_class is not None and "gpu_class" in rows:
        rows = rows[rows["gpu_class"] == gpu_class]
    if rows.empty:
        return []
    unique = rows[list(params)].astype("int64").drop_duplicates()
    return [{p: int(v) for p, v in zip(params, r, strict=True)} for r in unique.itertuples(index=False)]


def incumbents(
    frame: pd.DataFrame, gpu_class: str | None, params: Sequence[str], n: int
) -> list[dict[str, int]]:
    """The ``n`` fastest distinct configurations of ``gpu_class`` (every class where None) recorded as ok,
    fastest first: the sweep's own best, which the re-measure ranks beside its fresh pool."""
    rows = frame[frame["status"] == "ok"]
    if gpu_class is not None and "gpu_class" in rows:
        rows = rows[rows["gpu_class"] == gpu_class]
    if rows.empty or n <= 0:
        return []
    best = (
        rows.sort_values(cost_column(list(rows.columns)), kind="stable")[list(params)]
        .astype("int64")
        .drop_duplicates()
        .head(n)
    )
    return [{p: int(v) for p, v in zip(params, r, strict=True)} for r in best.itertuples(index=False)]


def ranked(
    predicted: np.ndarray,
    keys: Sequence[Key],
    exclude: Iterable[Key] = (),
    runnable: Callable[[int], bool] | None = None,
) -> list[int]:
    """Positions of the candidates from the best prediction to the worst (stable for ties), leaving out those
    whose key is in ``exclude`` and those ``runnable`` (given a position) says cannot run."""
    if len(predicted) != len(keys):
        raise ValueError(f"{len(predicted)} predictions for {len(keys)} candidates")
    bad = set(exclude)
    order = np.argsort(np.asarray(predicted, dtype=float), kind="stable")
    return [int(i) for i in order if keys[i] not in bad and (runnable is None or runnable(int(i)))]


def branch_leaders(order: Sequence[int], branches: Sequence[Hashable]) -> list[int]:
    """Ranks (positions in ``order``) of each branch's best-ranked candidate, best first; ``branches[i]`` is
    candidate ``i``'s branch. A branch whose leader fails is not followed further down: its next is not a
    leader."""
    leaders, seen = [], set()
    for rank, i in enumerate(order):
        if branches[i] not in seen:
            seen.add(branches[i])
            leaders.append(rank)
    return leaders


def predicted_pick(
    rows: pd.DataFrame, predicted: np.ndarray, params: Sequence[str], top_k: int = 5
) -> dict[str, Any]:
    """Replay of the pick on recorded rows: the unrestricted pick (the rows' best prediction, whatever its
    status) and the restricted one (the best prediction among rows that ran), each with its recorded status
    and time, the best of the restricted top ``top_k``, and the best recorded ok time of these rows."""
    if len(rows) != len(predicted) or rows.empty:
        raise ValueError(f"{len(predicted)} predictions for {len(rows)} rows (need one per row, and rows)")
    keys = [config_key(r, params) for r in rows[list(params)].to_dict("records")]
    status = rows["status"].to_numpy()
    ms = rows[cost_column(list(rows.columns))].to_numpy(float)
    failing = {k for k, s in zip(keys, status, strict=True) if s in FAILED_STATUSES}
    everything = ranked(predicted, keys)
    allowed = ranked(predicted, keys, exclude=failing, runnable=lambda i: status[i] == "ok")
    ok = status == "ok"
    best = float(np.nanmin(ms[ok])) if ok.any() else None

    def row(i: int) -> dict[str, Any]:
        return {
            "config": dict(zip(params, keys[i], strict=True)),
            "status": str(status[i]),
            "predicted_ms": float(predicted[i]),
            "ms": float(ms[i]) if status[i] == "ok" else None,
        }

    top = [ms[i] for i in allowed[:top_k]]
    pick = row(allowed[0]) if allowed else None
    return {
        "rows": int(len(rows)),
        "known_failures": len(failing),
        "unrestricted": row(everything[0]),
        "skipped": everything.index(allowed[0]) if allowed else len(everything),
        "pick": pick,
        "best_of_top_k": float(min(top)) if top else None,
        "top_k": top_k,
        "best_ms": best,
        "pick_over_best": pick["ms"] / best if pick and best else None,
        "top_k_over_best": min(top) / best if top and best else None,
    }
