"""How many SLURM jobs each GPU class should have: pure decisions, so they are tested without a cluster.

``ClassScaler`` (:mod:`pipeline.cluster.slurm`) asks these once a second and carries out the answer.
"""

from __future__ import annotations

from collections.abc import Mapping


def jobs_to_add(jobs: Mapping[str, int], demand: Mapping[str, int], workers_per_class: int) -> dict[str, int]:
    """Jobs to submit per class: up to ``min(workers_per_class, unfinished tasks needing the class)``.

    ``jobs`` counts each class's jobs (pending or running); a class above its target is not shrunk here (a
    running batch is never cut short), only released when idle (:func:`release_idle`).
    """
    out = {}
    for cls, have in jobs.items():
        want = min(workers_per_class, demand.get(cls, 0))
        if want > have:
            out[cls] = want - have
    return out


def release_idle(
    jobs: Mapping[str, int],
    demand: Mapping[str, int],
    idle_since: dict[str, float],
    now: float,
    release_after_s: float,
) -> list[str]:
    """Classes whose jobs should be given back: no task has needed them for ``release_after_s`` seconds.

    ``idle_since`` (class -> when it was first seen idle) is the only state and is updated in place. The delay
    keeps a class through the short gaps between the sweep's steps (plan, measure, re-measure).
    """
    release = []
    for cls, have in jobs.items():
        if demand.get(cls, 0) or not have:
            idle_since.pop(cls, None)
        elif now - idle_since.setdefault(cls, now) >= release_after_s:
            release.append(cls)
    return release
