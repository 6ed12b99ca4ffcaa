"""The embedded default cluster: one process worker per visible GPU (pinned and named), else one CPU worker.

Everything listens on 127.0.0.1 only: on a shared login or GPU node, a scheduler on a public port would let
any other user submit code that runs as you. Loopback keeps other machines out, not other users of this one,
so the scheduler, the workers and the client also speak TLS with mutual authentication, as on SLURM
(:func:`pipeline.cluster.security.local_security`: a key pair made for this cluster, in memory only); a
client without that key is refused during the handshake. The dashboard is plain HTTP on loopback (it shows
progress, it cannot run code); the printed line says how to tunnel.
"""

from __future__ import annotations

import getpass
import logging
import os
import re
import socket
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from launchtune.kernels.device import gpu_class_of, visible_gpu_names

from ..errors import UserError
from ..interrupts import deferred_signals
from . import ClusterHandle
from .security import local_security

logger = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"

# What an idle Dask worker does on its own: the statistical profiler walks every thread's stack each 10 ms,
# the GIL monitor samples each 1 ms, the memory monitor asks psutil each 100 ms. Measured in the scale
# rehearsal (issue 18, data/rehearsal/cpu/scale/): about 5% of a core per worker, so 32 replay workers on 2
# cores spent both cores on it and measured at ~10x the ideal. Turned off (memory checked each second) where
# the local cluster has more worker processes than cores; a worker per GPU on a GPU node keeps Dask's default.
# Then every Dask server (the scheduler, each Nanny, each worker: 65 for 32 workers) still wakes its event
# loop each 20 ms to time it (``admin.tick``) and asks psutil for CPU, memory, disk and network each 500 ms
# (the system monitor, which feeds the dashboard). Measured on the 2-core VM, 32 idle workers, 10 s: 0.19
# cores in the scheduler's process and 0.46 in the workers; with the tick each second 0.10 + 0.09; with both
# slowed 0.04 + 0.05 (the tick alone is most of it). The tick only warns of a blocked event loop (after 3 s).
QUIET_WORKER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "10s",
    "distributed.admin.system-monitor.disk": False,
}


def quiet_worker_config(
    n_workers: int, log: Callable[[str], None], cores: int | None = None
) -> dict[str, Any]:
    """:data:`QUIET_WORKER_CONFIG` where ``n_workers`` exceed the ``cores`` (saying so), else nothing: the
    Dask settings to hold while the cluster lives."""
    # the cores this process may run on (taskset, a batch job's cgroup cpuset), not the host's
    cores = cores or len(os.sched_getaffinity(0)) or 1
    if n_workers <= cores:
        return {}
    log(f"{n_workers} workers on {cores} cores: Dask's per-worker profiler and GIL monitor off, ticks slowed")
    return dict(QUIET_WORKER_CONFIG)


# Why not dask-cuda's LocalCUDACluster: dask-cuda 26.10.0 (the newest, checked 2026-11) requires
# rapids-dask-dependency==26.10.*, which pins dask and distributed to >=2026.7.1,<2026.7.2; ours are
# 2026.8.0, and each RAPIDS release pins one dask release. It would also bring cuda-core and nvidia-ml-py
# for what is here a few lines: one process worker per GPU with its own CUDA_VISIBLE_DEVICES.
# (LocalCUDACluster shows each worker every GPU, its own first; ours sees only its own, so a kernel can
# never land on a neighbour's card.)
#
# How GPUs are counted: through CuPy (kernels.device.visible_gpu_names), in CUDA's own order, which is what
# CUDA_VISIBLE_DEVICES indices mean (CUDA_DEVICE_ORDER, FASTEST_FIRST unless set, is inherited by the
# workers, so the parent and its workers agree). nvidia-smi numbers cards by PCI bus instead, which can
# differ on a host with mixed cards; rows therefore also record each card's pci_bus_id.


def _id_label(entry: str) -> str:
    """``"3"`` -> ``"gpu3"``; a UUID ``"GPU-8f3a2b1c-..."`` -> ``"gpu-8f3a2b1c-..."`` (``MIG-...`` alike)."""
    if entry.isdigit():
        return f"gpu{entry}"
    return re.sub(r"[^a-z0-9]+", "-", entry.lower()).strip("-")


def plan_local_workers(gpu_names: Sequence[str], visible: str | None, cpu_workers: int = 1) -> list[dict]:
    """Name, class and CUDA_VISIBLE_DEVICES of each local worker (pure, so it can be tested without a GPU).

    ``visible`` is this process's CUDA_VISIBLE_DEVICES: where it restricts the GPUs (``"2,3"``, UUIDs, MIG
    instances), the i-th visible GPU is its i-th entry, and that entry is what the worker must be pinned to;
    the worker's name carries it, so ``h100-gpu2`` is physical card 2 in this host's CUDA order (a UUID
    gives ``h100-gpu-8f3a2b1c``). Without a GPU, ``cpu_workers`` CPU workers (``cpu-0``, ``cpu-1``, ...):
    one by default, since workers on one CPU time each other; more for tests of several workers of one
    class and for hosts with cores to spare.
    """
    if not gpu_names:
        return [
            {"name": f"cpu-{i}", "gpu_class": "cpu", "env": {"CUDA_VISIBLE_DEVICES": ""}}
            for i in range(max(1, cpu_workers))
        ]
    # CUDA reads the list up to the first entry it cannot use: there may be more entries than GPUs, not fewer.
    ids = [v.strip() for v in visible.split(",")] if visible else [str(i) for i in range(len(gpu_names))]
    if len(ids) < len(gpu_names):
        raise UserError(
            f"CUDA_VISIBLE_DEVICES={visible!r} names {len(ids)} device(s) but CUDA shows {len(gpu_names)}; "
            "set it to a comma-separated list of GPU indices or UUIDs"
        )
    labels = [_id_label(ids[i]) for i in range(len(gpu_names))]
    short = [label if label.startswith("gpu") and label[3:].isdigit() else label[:12] for label in labels]
    if len(set(short)) == len(short):  # UUIDs shortened to their first 8 hex digits, unless two share them
        labels = short
    workers = []
    for i, name in enumerate(gpu_names):
        cls = gpu_class_of(name)
        workers.append(
            {"name": f"{cls}-{labels[i]}", "gpu_class": cls, "env": {"CUDA_VISIBLE_DEVICES": ids[i]}}
        )
    return workers


def tunnel_hint(dashboard: str) -> str:
    port = dashboard.rsplit(":", 1)[-1].split("/", 1)[0]
    return f"ssh -N -L {port}:127.0.0.1:{port} {getpass.getuser()}@{socket.gethostname()}"


@contextmanager
def open_local_cluster(
    gpu_classes: Sequence[str] | None,
    workdir: Path,
    log: Callable[[str], None] = logger.info,
    workers_per_class: int = 1,
) -> Iterator[ClusterHandle]:
    """Start a loopback-only LocalCluster of process workers, one per GPU (or CPU workers); always close it.

    Each worker carries the Dask resource ``{<its class>: 1}`` and runs one task at a time
    (``threads_per_worker=1``): two kernels timed at once on one GPU would time each other. For the same
    reason ``workers_per_class`` only applies without a GPU (that many CPU workers); with GPUs it is one per
    card, and CUDA_VISIBLE_DEVICES picks the cards.
    """
    import dask  # Dask's only where a cluster starts (one device measures in-process without it)
    from distributed import Client, LocalCluster

    if workers_per_class < 1:
        raise UserError(f"--workers-per-class: must be at least 1 (got {workers_per_class})")
    gpus = visible_gpu_names()
    workers = plan_local_workers(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"), cpu_workers=workers_per_class)
    if gpus and workers_per_class > 1:
        log(f"--workers-per-class {workers_per_class} ignored: the local cluster runs one worker per GPU")
    # Dask starts workers with MALLOC_TRIM_THRESHOLD_=65536, which turns off glibc's adaptive mmap threshold:
    # every large temporary array is then mapped and unmapped afresh. Measured on the numpy CFD workload
    # (208x64, 10 configurations): twice the page faults and 1.5x the wall time. The worker's time is the
    # measurement, so it must not depend on Dask's memory policy. Held, with the quiet settings, while the
    # cluster lives (Nanny reads it whenever it starts a worker, restarts included) and restored after, so a
    # notebook's later clusters get its own settings.
    config = {
        "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
        **quiet_worker_config(len(workers), log),
    }
    served = sorted({w["gpu_class"] for w in workers})
    if gpu_classes:
        missing = [c for c in gpu_classes if c not in served]
        if missing:
            raise UserError(
                f"GPU class {missing[0]!r} is not served by the local cluster (this machine has: "
                f"{', '.join(served)}); use --cluster slurm or CONFIG.yaml for other classes"
            )
    workdir.mkdir(parents=True, exist_ok=True)
    # Built and connected whole or not at all: a Ctrl-C while the scheduler starts or the client connects is
    # held until that step is done (seconds, under Dask's own timeouts), then raised with the cluster in hand
    # to close; cut short, a half-built cluster was closed only at the interpreter's exit, after Dask's waits.
    with dask.config.set(config), ExitStack() as stack:
        with deferred_signals(), warnings.catch_warnings():
            # A second sweep on the same machine finds the dashboard's port taken; Dask then serves it on a
            # free port and warns in four lines on stderr. The dashboard line below names the port it got.
            warnings.filterwarnings("ignore", r"Port \d+ is already in use", UserWarning)
            cluster = LocalCluster(
                n_workers=0,
                processes=True,
                threads_per_worker=1,
                host=LOOPBACK,
                protocol="tls://",
                security=local_security(),
                dashboard_address=f"{LOOPBACK}:8787",
                # the sweep reports every failure it sees in one line of its own (a task killed past Dask's
                # retries, a worker gone); Dask's ERROR lines would repeat it with a timestamp above that line
                silence_logs=logging.CRITICAL,
                local_directory=str(workdir),
            )
            stack.callback(cluster.close)
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
        with deferred_signals():
            client = Client(cluster)
            stack.callback(client.close)
        client.wait_for_workers(len(workers), timeout=180)
        dashboard = cluster.dashboard_link or "(no dashboard: install bokeh>=3.1)"
        hint = tunnel_hint(dashboard)
        log(f"dashboard: {dashboard}   (loopback only; from another machine: {hint})")
        names = ", ".join(w["name"] for w in workers)
        log(f"local cluster: {names}; scheduler {cluster.scheduler_address} (TLS, key in memory)")
        yield ClusterHandle(client=client, kind="local", gpu_classes=served, dashboard=dashboard)
