"""The two places where we lean on dask-jobqueue's private names, kept behind one small adapter.

Checked against dask-jobqueue 0.9.0 with distributed 2026.8.0 (the versions pinned in the lock of this
session's tests). If either changes, this module is the only one to mend; ``tests/slurm`` exercises both.
"""

from __future__ import annotations

import signal
import threading
from typing import Any


def _import_slurm_cluster() -> type:
    # dask_jobqueue.runner, imported with the package, replaces the SIGINT handler with sys.exit() (meant for
    # its batch runners); here that would turn Ctrl-C into a silent exit 0, so Python's handler is put back.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    from dask_jobqueue import SLURMCluster

    if main and previous is not None:
        signal.signal(signal.SIGINT, previous)
    return SLURMCluster


SLURMCluster = _import_slurm_cluster()


def job_kwargs(cluster: Any) -> dict[str, Any]:
    """What the cluster adds to every job it submits (scheduler protocol, interface, TLS files).

    ``JobQueueCluster._job_kwargs`` is private; there is no public way to build a job for another template.
    """
    return dict(cluster._job_kwargs)


async def submit_and_retire(cluster: Any) -> None:
    """Make the cluster's jobs match its ``worker_spec`` now (submit new entries, cancel removed ones).

    ``SpecCluster._correct_state`` is private; the public ``scale`` would overwrite our per-class spec.
    """
    await cluster._correct_state()
