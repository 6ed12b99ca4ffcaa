"""Independent fits in parallel processes: the largest first, a progress bar per phase, results in the order
they were asked for.

Each fit is seeded and single-threaded (``models.one_thread`` in the worker), so neither the number of
processes nor the order they finish in changes a number: the results are those of a serial run. joblib's
process pool rather than our own: it ships the arguments, reuses its workers between phases and runs
serially where there is one core.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from joblib import Parallel, cpu_count, delayed, parallel_config
from tqdm.auto import tqdm

from ..interrupts import check, children_ignore_sigint, ignore_sigint


def _indexed(i: int, func: Callable[..., Any], args: tuple) -> tuple[int, Any]:
    return i, func(*args)


def run_fits(
    calls: Sequence[tuple[Callable[..., Any], tuple]],
    sizes: Sequence[int],
    phases: Sequence[str],
    done: Callable[[int, Any], None] | None = None,
) -> list[Any]:
    """``func(*args)`` of each call in a process pool; returns the results in ``calls`` order.

    ``sizes`` rank the calls by cost: the largest start first, so the last to start are short and no core
    waits at the end on a long fit (longest-processing-time-first). ``phases`` names each call's bar (one bar
    per distinct name, counting its calls; tqdm's ``disable=None``: silent where stderr is not a TTY, as in
    logs and tests). ``done(i, result)`` is called as each finishes (in finishing order: for log lines only).
    """
    order = sorted(range(len(calls)), key=lambda i: -sizes[i])  # stable: ties keep their given order
    bars = {
        p: tqdm(total=list(phases).count(p), desc=p, unit="fit", disable=None) for p in dict.fromkeys(phases)
    }
    results: list[Any] = [None] * len(calls)
    # Ctrl-C reaches the pool's processes too (one process group): they ignore it, and the interrupt raised
    # here makes joblib kill them (it aborts its pool on any exception, KeyboardInterrupt included).
    with parallel_config(backend="loky", initializer=ignore_sigint):
        # joblib's cpu_count: the cores this process may use (affinity, cgroup quota), not the machine's
        pool = Parallel(n_jobs=max(1, min(len(calls), cpu_count())), return_as="generator_unordered")
    try:
        with children_ignore_sigint():  # the call starts the pool's processes (or reuses them)
            fits = pool(delayed(_indexed)(i, *calls[i]) for i in order)
        for i, result in fits:
            check()  # a fit run in this process (one core) swallows Ctrl-C: scikit-learn's MLP does
            results[i] = result
            bars[phases[i]].update()
            if done is not None:
                done(i, result)
    finally:
        for bar in bars.values():
            bar.close()
    return results


@contextmanager
def pool_ends_with_block() -> Iterator[None]:
    """The training pool (joblib's reusable loky executor, whose idle workers otherwise wait 300 s for more
    work) ends with the block, on success, failure or interrupt: a sweep leaves no process behind in its
    caller's process (the Python API), nor, re-parented to pid 1, after its caller (issue 54: a sweep whose
    workers all died left the pool's two workers running, and with them the two resource trackers whose pipe
    they held). Killed at once where the block failed; joined where it succeeded. The trackers themselves are
    left to end with this process: joblib unregisters its memory-mapping folder from the loky tracker at
    exit, and a tracker stopped before that is started again and prints a ``KeyError`` traceback."""
    failed = True
    try:
        yield
        failed = False
    finally:
        end_pool(kill=failed)


def end_pool(kill: bool = False) -> None:
    """End joblib's reusable process pool, if one is running (the next fit starts a fresh one). joblib has no
    public call for it: the pool is loky's module-level executor."""
    from joblib.externals.loky import reusable_executor

    executor = getattr(reusable_executor, "_executor", None)
    if executor is not None:
        executor.shutdown(wait=True, kill_workers=kill)
