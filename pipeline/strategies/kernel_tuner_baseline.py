"""Kernel Tuner's own strategies as baselines (``kt:<name>``, e.g. ``kt:genetic_algorithm``), run through its
simulation mode on the same recorded data and scored by the same code as ours.

Kernel Tuner (optional extra ``kt``: ``pip install -e .[kt]``) replays a cache file in simulation mode: each
configuration it evaluates is answered from the file, once (it never evaluates a configuration twice). So one
cache file per run holds, for every recorded configuration, the value our replay answers on its *first*
measurement under this run's noise seed (``ReplayWorkload.measurement``): Kernel Tuner sees
exactly the noisy values one of our strategies would see for the same configurations. Its search space is the
recorded configurations, failed ones included (a failed one costs an evaluation and answers
``RuntimeFailedConfig``, as on the device), its budget ``max_fevals`` = our budget (distinct configurations).
Afterwards the configurations it evaluated are measured through our ``Session`` in its order, so the budget,
the pick (best measured value) and the score (true value of the pick) come from the same code as for ours.
Python's and numpy's global generators, which Kernel Tuner's strategies draw from, are seeded with the run's
seed. A strategy that stops early (its own iteration limit) leaves the rest of the budget unspent.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .base import Session, StrategyError
from .kt_cache import to_cache
from .replay import ReplayWorkload

PREFIX = "kt:"


def available() -> bool:
    try:
        import kernel_tuner  # noqa: F401
    except ImportError:
        return False
    return True


def kt_strategy_names() -> list[str]:
    """Kernel Tuner's strategy names (empty when it is not installed)."""
    if not available():
        return []
    from kernel_tuner.interface import strategy_map

    return sorted(strategy_map)


def _cache(session: Session) -> dict:
    """The run's cache: every recorded configuration with its first noisy measurement (or its failure)."""
    workload = session.workload
    if not isinstance(workload, ReplayWorkload):
        raise StrategyError("Kernel Tuner runs in its simulation mode here: it needs a replayed dataset")
    noisy = [workload.measurement(row, session.repeats, visit=0) for row in range(len(workload._keys))]
    cache = to_cache(workload.dataset, times=np.array(noisy), repeats=False, whole=False)
    cache["kernel_name"] = "replay"
    return cache


# Above this many points in the product of the parameters' values, the search space is built from the recorded
# configurations directly instead of by Kernel Tuner's constraint solver, which enumerates the product (the
# fused CFD sweeps: 22 parameters, ~1e18 points; it did not finish in 90 s). Both give the same set.
MAX_ENUMERATED = 10**7


@contextlib.contextmanager
def _recorded_searchspace(cache: dict, params: list[str]) -> Iterator[None]:
    """Within the block, Kernel Tuner's ``tune_kernel`` builds its search space from ``cache``'s entries
    (``Searchspace(from_cache=...)``, Kernel Tuner's own way to skip construction) where the product of the
    values is larger than ``MAX_ENUMERATED``; the strategies, neighbours and simulation are untouched.
    ``tune_kernel`` offers no argument for it, hence the patch of the name its module looks up."""
    product = math.prod(len(v) for v in cache["tune_params"].values())
    if product <= MAX_ENUMERATED:
        yield
        return
    from kernel_tuner import interface
    from kernel_tuner.searchspace import Searchspace

    ordered = {
        "tune_params": cache["tune_params"],
        "cache": {k: {p: e[p] for p in params} for k, e in cache["cache"].items()},
    }

    def recorded(tune_params: Any, restrictions: Any, max_threads: Any, **options: Any) -> Searchspace:
        return Searchspace(None, None, None, from_cache=ordered, **options)

    original = interface.Searchspace
    interface.Searchspace = recorded
    try:
        yield
    finally:
        interface.Searchspace = original


def run_kernel_tuner(session: Session, strategy: str, options: dict | None = None) -> list[dict[str, int]]:
    """Kernel Tuner's ``strategy`` in simulation mode on this session's data: the distinct configurations it
    evaluated, in its order (at most ``session.budget``)."""
    if not available():
        raise StrategyError(
            "kt: strategies need Kernel Tuner: pip install 'kernel_tuner==1.5.0' (extra 'kt')"
        )
    import kernel_tuner
    from constraint import FunctionConstraint

    if not isinstance(session.workload, ReplayWorkload):
        raise StrategyError("kt: strategies run on recorded data only (a replayed dataset)")
    names = kt_strategy_names()
    if strategy not in names:
        raise StrategyError(f"unknown Kernel Tuner strategy {strategy!r}: choose one of {', '.join(names)}")
    cache = _cache(session)
    params = cache["tune_params_keys"]
    recorded = {tuple(e[p] for p in params) for e in cache["cache"].values()}
    size = (1,)

    def in_cache(*values) -> bool:  # the recorded configurations, failed ones included
        return values in recorded

    random.seed(session.seed)
    np.random.seed(session.seed)  # Kernel Tuner's strategies draw from numpy's global generator
    with tempfile.TemporaryDirectory() as tmp, _recorded_searchspace(cache, params):
        path = Path(tmp) / "cache.json"
        path.write_text(json.dumps(cache))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results, _ = kernel_tuner.tune_kernel(
                cache["kernel_name"],
                "",
                size,
                [],
                cache["tune_params"],
                restrictions=[FunctionConstraint(in_cache)],
                cache=str(path),
                simulation_mode=True,
                strategy=strategy,
                strategy_options={"max_fevals": session.budget, **(options or {})},
                # the recorded objective in its direction (GFLOP/s, higher is better): Kernel Tuner ranks
                # by time otherwise, and a cache without times has none (KeyError: 'time')
                objective=cache["objective"],
                objective_higher_is_better=bool(cache.get("objective_higher_is_better", False)),
                quiet=True,
                verbose=False,
            )
    order, seen = [], set()
    for r in results:
        key = tuple(int(r[p]) for p in params)
        if key not in seen:
            seen.add(key)
            order.append(dict(zip(params, key, strict=True)))
    return order[: session.budget]


def strategy(name: str) -> Callable[[Session], None]:
    """``tune(session)`` running Kernel Tuner's ``name`` (the part after ``kt:``)."""

    def tune(session: Session) -> None:
        for config in run_kernel_tuner(session, name):
            session.measure(config)

    tune.__doc__ = f"Kernel Tuner 1.5's {name} in simulation mode on the session's recorded data."
    return tune
