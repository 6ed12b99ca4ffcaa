"""Per-kernel exhaustive search: every kernel's own launch space in full, the others held at their default.

For the CFD step (7 kernels x 120 settings = 840 measurements instead of 3.6e14) this finds the optimum of the
separable problem exactly; one more measurement of the composed configuration shows what the interaction
between kernels costs. On a dataset without per-kernel structure it is plain exhaustive search, so it needs a
budget of the whole space; a smaller budget is refused rather than silently truncated.

Each distinct configuration is measured once: every kernel's space contains its default setting, so the
all-default launch belongs to every kernel's sweep but costs one measurement (on a sweep whose grid lacks the
default setting, as the paper's blocks 100..1000 lack "one thread per cell", it is the one extra measurement
that tells how far the default is from the per-kernel optima). The composed configuration is measured only
when the sweep did not already measure it.

Batching: every kernel's grid is one batch (``Session.settle``), then the composed configuration.
"""

from __future__ import annotations

import itertools

import numpy as np

from .base import Session, StrategyError


def plan(session: Session) -> list[dict[str, int]]:
    """The configurations this strategy measures, in order (the composed pick comes after them)."""
    if not session.kernels:
        return [session.config(i) for i in range(len(session.X))]
    default = dict(session.space.default)
    configs, seen = [], set()
    for names in session.kernels.values():
        for values in itertools.product(*(session.space[n].values for n in names)):
            config = {**default, **dict(zip(names, values, strict=True))}
            key = tuple(config[n] for n in session.names)
            if key not in seen and session.can_measure(config):
                seen.add(key)
                configs.append(config)
    return configs


def tune(session: Session) -> None:
    configs = plan(session)
    need = len(configs) + (1 if session.kernels else 0)
    if session.budget < need:
        raise StrategyError(
            f"per_kernel_exhaustive needs a budget of {need} measurements here, got {session.budget}"
        )
    if not session.kernels:
        for config in configs:
            session.measure(config)
        return
    best: dict[str, tuple[float, dict[str, int]]] = {}
    for config in configs:
        session.measure(config)
    session.settle()  # the whole grid is one batch: every answer is needed before composing
    for m in session.history:
        config = m.config
        for kernel, names in session.kernels.items():
            t = m.kernels.get(kernel, np.inf)
            if t < best.get(kernel, (np.inf, {}))[0]:
                best[kernel] = (t, {n: config[n] for n in names})
    composed = dict(session.space.default)
    for _, setting in best.values():
        composed.update(setting)
    if session.can_measure(composed) and composed not in configs:
        session.measure(composed)
    session.measure_random(session.remaining)
