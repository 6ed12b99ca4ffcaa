"""The embedded default cluster: one process worker per visible GPU (pinned and named), else one CPU worker.

Everything listens on 127.0.0.1 only: on a shared login or GPU node, a scheduler on a public port would let
any
other user submit code that runs as you. The dashboard is on loopback too; the printed line says how to
tunnel.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from kernels.device import gpu_class_of, visible_gpu_names
from pipeline.cluster import ClusterHandle
from pipeline.errors import UserError

LOOPBACK = "127.0.0.1"


def plan_local_workers(gpu_names: Sequence[str], visible: str | None) -> list[dict]:
    """Name, class and CUDA_VISIBLE_DEVICES of each local worker (pure, so it can be tested without a GPU).

    ``visible`` is this process's CUDA_VISIBLE_DEVICES: where it restricts the GPUs, the i-th visible GPU is
    its i-th entry, and that entry is what the worker must be pinned to.
    """
    if not gpu_names:
        return [{"name": "cpu-0", "gpu_class": "cpu", "env": {"CUDA_VISIBLE_DEVICES": ""}}]
    ids = [v.strip() for v in visible.split(",")] if visible else [str(i) for i in range(len(gpu_names))]
    workers = []
    for i, name in enumerate(gpu_names):
        cls = gpu_class_of(name)
        workers.append(
            {"name": f"{cls}-gpu{ids[i]}", "gpu_class": cls, "env": {"CUDA_VISIBLE_DEVICES": ids[i]}}
        )
    return workers


def tunnel_hint(dashboard: str) -> str:
    port = dashboard.rsplit(":", 1)[-1].split("/", 1)[0]
    return f"ssh -N -L {port}:127.0.0.1:{port} {getpass.getuser()}@{socket.gethostname()}"


@contextmanager
def open_local_cluster(
    gpu_classes: Sequence[str] | None, workdir: Path, log: Callable[[str], None] = print
) -> Iterator[ClusterHandle]:
    """Start a loopback-only LocalCluster of process workers, one per GPU (or one CPU worker); always close
    it.

    Each worker carries the Dask resource ``{<its class>: 1}`` and runs one task at a time
    (``threads_per_worker=1``): two kernels timed at once on one GPU would time each other.
    """
    import dask
    from distributed import Client, LocalCluster

    # Dask starts workers with MALLOC_TRIM_THRESHOLD_=65536, which turns off glibc's adaptive mmap threshold:
    # every large temporary array is then mapped and unmapped afresh. Measured on the numpy CFD workload
    # (208x64, 10 configurations): twice the page faults and 1.5x the wall time. The worker's time is the
    # measurement, so it must not depend on Dask's memory policy. (Set for this process: Nanny reads it when
    # it starts a worker, including restarts.)
    dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None})

    workers = plan_local_workers(visible_gpu_names(), os.environ.get("CUDA_VISIBLE_DEVICES"))
    served = sorted({w["gpu_class"] for w in workers})
    if gpu_classes:
        missing = [c for c in gpu_classes if c not in served]
        if missing:
            raise UserError(
                f"GPU class {missing[0]!r} is not served by the local cluster (this machine has: "
                f"{', '.join(served)}); use --cluster slurm or CONFIG.yaml for other classes"
            )
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(
        n_workers=0,
        processes=True,
        threads_per_worker=1,
        host=LOOPBACK,
        dashboard_address=f"{LOOPBACK}:8787",
        silence_logs=logging.ERROR,
        local_directory=str(workdir),
    )
    try:
        template = cluster.new_spec
        for w in workers:
            options = {
                **template["options"],
                "name": w["name"],
                "env": w["env"],
                "resources": {w["gpu_class"]: 1},
            }
            cluster.worker_spec[w["name"]] = {"cls": template["cls"], "options": options}
        cluster.scale(len(cluster.worker_spec))
        client = Client(cluster)
        try:
            client.wait_for_workers(len(workers), timeout=180)
            dashboard = cluster.dashboard_link or "(no dashboard: install bokeh>=3.1)"
            log(f"dashboard: {dashboard}   (loopback only; from another machine: {tunnel_hint(dashboard)})")
            log(f"local cluster: {', '.join(w['name'] for w in workers)}")
            yield ClusterHandle(client=client, kind="local", gpu_classes=served, dashboard=dashboard)
        finally:
            client.close()
    finally:
        cluster.close()
