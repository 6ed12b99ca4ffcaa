"""Every wait on the cluster has a limit (issue 14): a task that never ends (a worker gone for good, a job
that never starts) stops the sweep with one line naming what it waited for, instead of hanging it.

The limit bounds one wait: a class's plan, the next batch to finish, a re-measurement, the workers' warm-up.
Each of those is minutes at most on a working cluster; the default is an hour on the local cluster and a day
on SLURM, where a job may wait that long in the queue. ``$LAUNCHTUNE_WAIT_S`` sets another (seconds).

On the local cluster a wait also ends when every worker that could answer it has been gone for ``GONE_S``
(30 s: Dask's Nanny restarts a killed worker within seconds); ``$LAUNCHTUNE_GONE_S`` sets another, longer
where a worker takes that long to start (a loaded machine, a slow file system), shorter to give up sooner.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from ..errors import UserError

WAIT_ENV = "LAUNCHTUNE_WAIT_S"
GONE_ENV = "LAUNCHTUNE_GONE_S"
DEFAULT_WAIT_S = {"local": 3600.0, "slurm": 86400.0}
# How often a wait looks at the cluster, and how long the workers that could answer it may all be gone
# (Dask's Nanny restarts a killed worker in a few seconds; one killed while it restarts is not restarted
# again, distributed 2026.8).
POLL_S = 5.0
GONE_S = 30.0
# The longest limit one may set: 30 days, past any queue. Event loops and thread waits overflow on limits
# near 1e300 (and a limit of centuries is no limit).
MAX_WAIT_S = 30 * 86400.0


class ClusterFailure(UserError):
    """The cluster failed the sweep (a worker gone for good, tasks killed past Dask's retries): one line, as
    a user error, but exit 1 (not the input's fault)."""

    exit_code = 1


class ClusterTimeout(ClusterFailure):
    """A wait on the cluster past its limit."""


def wait_limit(kind: str) -> float:
    """Seconds one wait on a ``kind`` cluster (``local``, ``slurm``) may take: ``$LAUNCHTUNE_WAIT_S`` or the
    default."""
    return _seconds(WAIT_ENV, DEFAULT_WAIT_S.get(kind, DEFAULT_WAIT_S["slurm"]))


def gone_limit() -> float:
    """Seconds a local class may have no worker left while work waits on it: ``$LAUNCHTUNE_GONE_S`` or
    ``GONE_S``."""
    return _seconds(GONE_ENV, GONE_S)


def _seconds(variable: str, default: float) -> float:
    """The environment variable's seconds (``default`` where unset or empty); one line where it is not a
    number > 0 and at most ``MAX_WAIT_S``."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        seconds = float(raw)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds <= MAX_WAIT_S:
        got = raw[:40]
        raise UserError(
            f"${variable}: must be a number of seconds > 0 and at most {MAX_WAIT_S:.0f} (got {got!r})"
        )
    return seconds


def timed_out(what: str, limit: float) -> ClusterTimeout:
    return ClusterTimeout(
        f"timed out: {what}: nothing came back from the cluster in {limit:g} s (${WAIT_ENV} sets the limit); "
        "what was measured is kept, the same command again goes on"
    )


def result(future: Any, what: str, limit: float, alive: Callable[[], bool] | None = None) -> Any:
    """``future.result()``, waiting at most ``limit`` seconds; past it, one line naming ``what``. A task that
    failed on its worker is one line too, naming ``what`` and the error: exit 2 where the workload could not
    be built as the spec asks (a ``WorkloadError``, a size that does not fit the worker's memory), else exit 1
    (a worker killed past Dask's retries). The worker's traceback is its own log's.

    ``alive`` (where workers that are gone will not come back: the local cluster) is asked every ``POLL_S``
    whether any worker that can run the task is left; none for ``gone_limit()`` seconds is one line, exit 1,
    not the limit's hour of silence."""
    deadline = time.monotonic() + limit
    gone_s = gone_limit()
    gone_since: float | None = None
    while True:
        left = deadline - time.monotonic()
        try:
            return _outcome(future, what, max(0.0, min(left, POLL_S) if alive is not None else left))
        except TimeoutError:
            now = time.monotonic()
            if now >= deadline:
                future.cancel()
                raise timed_out(what, limit) from None
            assert alive is not None
            if alive():
                gone_since = None
            elif now - (gone_since := gone_since or now) >= gone_s:
                future.cancel()
                raise ClusterFailure(
                    f"{what}: every worker that could run it died and none was restarted within "
                    f"{gone_s:g} s; what was measured is kept, the same command again goes on"
                ) from None


def _outcome(future: Any, what: str, timeout: float) -> Any:
    """``future.result(timeout)``, a ``TimeoutError`` passed on, a failure on the worker one line."""
    try:
        return future.result(timeout=timeout)
    except (KeyboardInterrupt, UserError, TimeoutError):
        raise
    except Exception as exc:
        from launchtune.kernels.workload import WorkloadError

        first = (str(exc).splitlines() or [""])[0][:400]
        line = f"{what} failed on the cluster: {type(exc).__name__}: {first}"
        if isinstance(exc, WorkloadError | MemoryError):
            raise UserError(line) from None
        raise ClusterFailure(line + "; what was measured is kept, the same command again goes on") from None
