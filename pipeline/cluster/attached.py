"""A Dask cluster the caller already has (a ``distributed.Client``, or a cluster object such as a
``LocalCluster`` or dask-jobqueue's ``SLURMCluster``): the sweep uses it as it is and leaves it running.

The sweep routes each task to a GPU class through a Dask resource named after the class (``{"h100": 1}``,
:mod:`launchtune.pipeline.cluster`). A worker started with such a resource keeps it; a worker without one
is asked which device it sees (its first visible GPU's class, else ``cpu``) and given that resource, which
it keeps afterwards (one unit: it also keeps two measurements from timing each other on one worker of
several threads). Each worker should see one GPU (dask-cuda's ``LocalCUDACluster``, or one
``CUDA_VISIBLE_DEVICES`` per worker): a worker that sees several measures on the first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from launchtune.kernels.device import GPU_CLASSES

from ..errors import UserError
from . import ClusterHandle
from .waits import wait_limit

logger = logging.getLogger(__name__)

KIND = "attached"


def is_dask_cluster(obj: Any) -> bool:
    """A ``distributed.Client`` or anything a client can be made from (``cluster.scheduler_address``)."""
    from distributed import Client

    return isinstance(obj, Client) or isinstance(getattr(obj, "scheduler_address", None), str)


def device_class() -> str:
    """The GPU class of the device this process sees first (``cpu`` where it sees none); runs on a worker."""
    from launchtune.kernels.device import gpu_class_of, visible_gpu_names

    names = visible_gpu_names()
    return gpu_class_of(names[0]) if names else "cpu"


async def _add_resource(gpu_class: str, dask_worker: Any = None) -> None:
    await dask_worker.set_resources(**{gpu_class: 1})


def worker_classes(client: Any, known: tuple[str, ...] = GPU_CLASSES) -> dict[str, str]:
    """Each worker's GPU class (address -> class): the class resource it carries, else the device it sees,
    which then becomes its resource."""
    classes, unmarked = {}, []
    for address, info in client.scheduler_info(n_workers=-1)["workers"].items():
        marked = [r for r, n in (info.get("resources") or {}).items() if r in known and n >= 1]
        if marked:
            classes[address] = marked[0]
        else:
            unmarked.append(address)
    if unmarked:
        seen = client.run(device_class, workers=unmarked)
        for address, cls in seen.items():
            client.run(_add_resource, cls, workers=[address])
            classes[address] = cls
    return classes


@contextmanager
def attached_cluster(obj: Any, log: Callable[[str], None] = logger.info) -> Iterator[ClusterHandle]:
    """A handle on the caller's cluster or client; a client made here is closed after, the cluster never."""
    from distributed import Client

    with ExitStack() as stack:
        if isinstance(obj, Client):
            client = obj
        elif is_dask_cluster(obj):
            client = stack.enter_context(Client(obj))
        else:
            raise UserError(
                f"cluster: expected 'local', a cluster config's path, or a Dask Client or cluster; got "
                f"{type(obj).__name__}"
            )
        if client.status != "running":
            raise UserError(f"cluster: the Dask client is {client.status}, not running")
        if not client.scheduler_info(n_workers=-1)["workers"]:
            limit = wait_limit(KIND)
            log(f"waiting for the cluster's first worker (at most {limit:g} s; $LAUNCHTUNE_WAIT_S sets it)")
            try:
                client.wait_for_workers(1, timeout=limit)
            except TimeoutError:
                raise UserError(f"cluster: no worker joined in {limit:g} s; scale the cluster up") from None
        classes = worker_classes(client)
        served = sorted(set(classes.values()))
        log(f"your Dask cluster: {len(classes)} workers ({', '.join(served)}), {client.dashboard_link}")
        yield ClusterHandle(client=client, kind=KIND, gpu_classes=served, dashboard=client.dashboard_link)
