"""A Dask worker preload: Ctrl-C in the terminal reaches the local cluster's workers too (one process group);
they ignore it, and the sweep that owns them closes the cluster (``pipeline.interrupts``). Without it each
worker prints a traceback of its own beside the sweep's one line.

``preloaded()`` adds this module to ``distributed.worker.preload`` while a cluster starts; the Nanny hands its
Dask config to each worker process it starts (restarts included), and the worker runs ``dask_setup`` on its
main thread, where signal handlers may be set.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dask

from ..interrupts import ignore_sigint


def dask_setup(worker: Any) -> None:
    ignore_sigint()


@contextmanager
def preloaded() -> Iterator[None]:
    preload = list(dask.config.get("distributed.worker.preload", []) or [])
    with dask.config.set({"distributed.worker.preload": [*preload, __name__]}):
        yield
