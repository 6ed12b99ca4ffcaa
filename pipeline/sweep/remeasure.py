"""Re-measuring on a worker of the class: a sweep's model-ranked candidates (``remeasure_task``) or a search's
best measured configurations (``pick_task``), each checked and measured again, the fastest that ran timed
against the default in interleaved rounds (``launchtune.kernels.compare``: the ratio's 95% interval)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from launchtune.kernels.compare import compare, interleaved
from launchtune.kernels.objective import cost_of

from ..learn.pick import MAX_REJECTED_PER_PICK, branch_leaders, ranked
from .worker import get_workload, measure_one, worker_name


def pick_task(
    spec: Mapping[str, Any], picks: list[dict[str, int]], repeats: int, seed: int, rounds: int = 21
) -> dict[str, Any]:
    """A search's pick re-measured against the default on a worker of the class, in ``validation.json``'s
    shape (``remeasure_task``'s): ``picks`` are the search's best measured configurations, best first; each
    is checked and measured again, the fastest that ran is the pick, and it is timed against the default in
    ``rounds`` interleaved rounds (``launchtune.kernels.compare``: the ratio's 95% interval)."""
    workload, facts = get_workload(spec)
    space = workload.space()
    measured: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    for rank, config in enumerate(picks):
        m = measure_one(spec, config, repeats, True)
        entry = {"config": dict(config), "predicted_ms": None, "predicted_rank": rank, **m, "recorded": True}
        (measured if m["status"] == "ok" else rejected).append(entry)
    measured.sort(key=lambda m: m["objective"])
    default = measure_one(spec, space.default, repeats, True)
    comparison = None
    if facts["backend"] != "numpy" and measured and default["status"] == "ok":
        comparison = _pick_against_default(workload, space, measured[0]["config"], repeats, rounds, seed)
    return {
        "comparison": comparison,
        "backend": facts["backend"],
        "device": facts,
        "host": socket.gethostname(),
        "worker": worker_name(),
        "pool": len(picks),
        "candidates": measured,
        "rejected": rejected,
        "excluded_known_failures": 0,
        "default": {"config": space.default, **default},
        "python": sys.version.split()[0],
        "objective": dict(workload.describe().get("objective") or {"minimize": "time"}),  # what ranked them
    }


def remeasure_task(
    spec: Mapping[str, Any],
    model: Any,
    features: list[str],
    extra_configs: list[dict[str, int]],
    pool: int,
    top_k: int,
    repeats: int,
    seed: int,
    rounds: int = 21,
    exclude: list[dict[str, int]] | None = None,
    recorded: list[dict[str, int]] | None = None,
) -> dict[str, Any]:
    """Rank a candidate pool with ``model`` on the class's own worker, measure the top few and the default,
    and time the fastest of the top few (the pick, ``candidates[0]``) against the default in ``rounds``
    interleaved rounds.

    Only runnable configurations are picked (``launchtune.pipeline.learn.pick``): the pool obeys the space's
    constraints, ``exclude`` (the configurations the sweep recorded as invalid or failed) is never measured,
    and a candidate whose check or run fails here is set aside in ``rejected``, the next one measured, until
    ``top_k`` ran (or ``MAX_REJECTED_PER_PICK`` x ``top_k`` were rejected). ``candidates`` holds only the ones
    that ran, fastest first, each with its ``predicted_rank``; configurations that differ only in parameters
    they leave unused (``Space.active_key``) count once, and the best-ranked configuration of every branch of
    a conditional space (``Space.branch``) that the top ``top_k`` missed is measured as well. ``recorded``
    (the sweep's fastest rows, ``pipeline.learn.pick.incumbents``) join the pool, are ranked with it and are
    measured whatever their rank; a candidate that is one of them says so (``recorded: true``).

    Candidates are drawn here because the space's constraints are the device's; what counts afterwards is the
    measured time, not the prediction. The interleaved rounds give the speed-up its 95% interval and verdict
    (``kernels.compare``); a backend that ignores launch parameters (numpy) gets none: there is no speed-up to
    find there, only noise.
    """

    workload, facts = get_workload(spec)
    space = workload.space()
    candidates = space.sample(pool, seed)
    candidates += [space.validate(c) for c in extra_configs if space.is_valid(c)]
    incumbent = [space.validate(c) for c in recorded or [] if space.is_valid(c)]
    candidates += incumbent
    incumbent_keys = {space.active_key(c) for c in incumbent}
    # One candidate per configuration that runs differently: rows that differ only in parameters their
    # choice leaves unused (space.inactive) are one configuration, and top_k of them would re-measure one.
    seen, unique = set(), []
    for c in candidates:
        key = space.active_key(c)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    X = np.array([[c[f] for f in features] for c in unique], dtype=float)
    predicted = model.predict(X)
    known_bad = {space.active_key(c) for c in exclude or [] if all(n in c for n in space.names)}
    order = ranked(predicted, [space.active_key(c) for c in unique], exclude=known_bad)
    measured: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []

    def measure(rank: int) -> bool:
        i = order[rank]
        m = measure_one(spec, unique[i], repeats, True)
        entry = {"config": unique[i], "predicted_ms": float(predicted[i]), "predicted_rank": rank, **m}
        entry["recorded"] = space.active_key(unique[i]) in incumbent_keys
        (measured if m["status"] == "ok" else rejected).append(entry)
        return m["status"] == "ok"

    def may_reject() -> bool:
        return len(rejected) < MAX_REJECTED_PER_PICK * top_k

    for rank in range(len(order)):
        if len(measured) >= top_k or not may_reject():
            break
        measure(rank)
    # A conditional space's branches (fused CFD: the fusion level) run different kernels, and a model's error
    # differs between them: the best-ranked configuration of every branch the top_k missed is measured too.
    ran_branches = {space.branch(m["config"]) for m in measured}
    for rank in branch_leaders(order, [space.branch(c) for c in unique]):
        branch = space.branch(unique[order[rank]])
        if branch not in ran_branches and may_reject() and measure(rank):
            ran_branches.add(branch)
    # The sweep's own fastest rows are measured too, whatever their rank: a surrogate extrapolates optimism
    # into a fresh pool (on the fused H200 sweep its top 5 ran 4% slower than the best recorded row), and a
    # pick slower than what the sweep already found would be a step back for the user.
    done = {space.active_key(m["config"]) for m in measured + rejected}
    for rank, i in enumerate(order):
        if space.active_key(unique[i]) in incumbent_keys - done and may_reject():
            measure(rank)
    # The model shortlists, the measurement decides: the pick is the fastest of those that ran (stable, so a
    # tie keeps the model's order). Its speed-up is timed afresh below, so choosing the minimum of noisy
    # times does not bias the reported ratio.
    measured.sort(key=lambda m: m["objective"])
    default = measure_one(spec, space.default, repeats, True)
    comparison = None
    if (
        facts["backend"] != "numpy"
        and measured
        and measured[0]["status"] == "ok"
        and default["status"] == "ok"
    ):
        comparison = _pick_against_default(workload, space, measured[0]["config"], repeats, rounds, seed)
    return {
        "comparison": comparison,
        "backend": facts["backend"],
        "device": facts,
        "host": socket.gethostname(),
        "worker": worker_name(),
        "pool": len(unique),
        "candidates": measured,
        "rejected": rejected,
        "excluded_known_failures": len(known_bad),
        "default": {"config": space.default, **default},
        "python": sys.version.split()[0],
        "objective": dict(workload.describe().get("objective") or {"minimize": "time"}),  # what ranked them
    }


def _pick_against_default(
    workload: Any, space: Any, pick: Mapping[str, int], repeats: int, rounds: int, seed: int
) -> dict[str, Any]:
    """The pick timed against the default configuration in interleaved rounds (``kernels.compare``): the
    ratio, its interval and verdict, and every round's times."""
    chosen = space.validate(pick)

    def time_of(config: Mapping[str, int]) -> Callable[[], float]:  # the objective's cost: time by default
        return lambda: cost_of(workload.run(config, repeats))

    a, b = interleaved(time_of(space.default), time_of(chosen), rounds)
    return {**compare(a, b, seed=seed).as_dict(), "default_ms": a, "pick_ms": b}
