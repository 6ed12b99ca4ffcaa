"""One local device, measured in the caller's process: no Dask cluster, no TLS.

Why: a sweep or search on one GPU (or the CPU) of this machine has one worker. A Dask cluster then buys
nothing (there is no second card to feed, and a worker lost mid-batch is the caller's process itself) and
costs its start: a scheduler, a Nanny and a worker process with TLS and a key pair made for them, the worker's
imports, and a round trip per measurement. Measured on the 2-core VM (2026-12-04): 1.6-1.8 s to start a
one-worker local cluster with TLS, and a search of 60 replayed measurements (0.9 s of sleeps) took 1.81 s
through it against 1.17-1.31 s here (``CHANGELOG.md``, issue 53). Here the tasks run
where they are submitted, one at a time, in submission order, as the single worker ran them; crash safety is
the same files' (every shard written atomically, a search's journal appended as answers arrive), so a
resumed run measures nothing twice. Several GPUs, SLURM and a caller's own Dask cluster keep Dask
(:func:`launchtune.pipeline.cluster.open_cluster`).

:class:`InlineClient` offers the few calls of Dask's ``Client`` the sweep makes around a measurement
(``submit`` and ``result``, ``scheduler_info``, ``cancel``); the measuring loops themselves have an in-process
form (``sweep.measure.measure_in_process``, ``sweep.search.InProcessAnswers``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from launchtune.kernels.device import visible_gpu_names

from ..errors import UserError
from . import ClusterHandle

KIND = "inline"


class InlineFuture:
    """A task already run: its value, or the exception it raised (re-raised by ``result``, as Dask's is)."""

    status = "finished"

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value, self.error = value, error
        if error is not None:
            self.status = "error"

    def result(self, timeout: float | None = None) -> Any:
        if self.error is not None:
            raise self.error
        return self.value

    def exception(self) -> BaseException | None:
        return self.error

    def done(self) -> bool:
        return True

    def cancel(self) -> None:
        pass


class InlineClient:
    """Dask's ``Client`` as far as the sweep uses it around its measuring, run here: ``submit`` runs the task
    at once; Dask's placement options (resources, priority, retries, keys) mean nothing with one worker."""

    in_process = True

    def __init__(self, name: str, gpu_class: str) -> None:
        self.name, self.gpu_class = name, gpu_class

    def submit(self, fn: Callable[..., Any], *args: Any, **dask_options: Any) -> InlineFuture:
        try:
            return InlineFuture(fn(*args))
        except Exception as exc:  # noqa: BLE001  (a task's failure is its future's, as on a worker; Ctrl-C is not)
            return InlineFuture(error=exc)

    def scheduler_info(self) -> dict[str, Any]:
        return {"workers": {self.name: {"name": self.name, "resources": {self.gpu_class: 1}}}}

    def cancel(self, futures: Sequence[Any]) -> None:
        pass


def one_local_worker(workers_per_class: int) -> dict[str, Any] | None:
    """The local cluster's only worker (name, class), where it would have one: one visible GPU, or none and
    one CPU worker; None where it would have several."""
    from .local import plan_local_workers

    workers = plan_local_workers(
        visible_gpu_names(), os.environ.get("CUDA_VISIBLE_DEVICES"), cpu_workers=workers_per_class
    )
    return workers[0] if len(workers) == 1 else None


@contextmanager
def open_inline(
    worker: dict[str, Any], gpu_classes: Sequence[str] | None, log: Callable[[str], None]
) -> Iterator[ClusterHandle]:
    """The handle of ``worker`` (``one_local_worker``'s), measuring in this process."""
    cls = str(worker["gpu_class"])
    for c in gpu_classes or ():
        if c != cls:
            raise UserError(
                f"GPU class {c!r} is not served by the local cluster (this machine has: {cls}); "
                "use --cluster slurm or CONFIG.yaml for other classes"
            )
    log(f"one device ({worker['name']}): measuring in this process, without a Dask cluster")
    yield ClusterHandle(
        client=InlineClient(str(worker["name"]), cls), kind=KIND, gpu_classes=[cls], dashboard=""
    )
