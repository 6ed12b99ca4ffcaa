"""Where work runs.

``open_cluster`` yields a :class:`ClusterHandle` whose client's workers each carry a Dask resource named after
their GPU class (``{"h100": 1}``), so a task submitted with ``resources={cls: 1}`` only runs on that class's
workers. Kinds: ``local`` (:mod:`pipeline.cluster.local`: one worker per visible GPU, else one CPU worker) and
``slurm`` (:mod:`launchtune.pipeline.cluster.slurm`: dask-jobqueue, one job template per GPU class).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from launchtune.kernels.device import GPU_CLASSES

from ..errors import UserError
from ..interrupts import deferred_signals, spawned_ignore_sigint
from ..jsonio import check_input

logger = logging.getLogger(__name__)

# Package data: a wheel installs it as plain files, so the folder is a real path.
CLUSTER_DIR = Path(str(files("launchtune.cluster_configs")))


@dataclass
class ClusterHandle:
    """A connected client plus what the sweep needs to know about the cluster behind it."""

    client: Any  # distributed.Client
    kind: str  # "local", "slurm", or "attached" (the caller's own Dask cluster)
    gpu_classes: list[str]  # the classes this cluster can serve, e.g. ["cpu"] or ["v100", "h100"]
    dashboard: str  # address to print (with an ssh tunnel hint where it is not local)
    facts: dict[str, Any] = field(default_factory=dict)  # per-class device facts known up front (slurm.yaml)


def resolve_cluster_config(cluster: str) -> Path | None:
    """``local`` -> None; ``slurm`` -> cluster_configs/slurm.yaml; anything else is a path to a YAML file."""
    if cluster == "local":
        return None
    path = CLUSTER_DIR / "slurm.yaml" if cluster == "slurm" else Path(cluster)
    try:  # missing, a directory, a FIFO, a symlink loop: each its own line
        check_input(path, "cluster config", folder_ok=False)
    except UserError as exc:
        raise UserError(f"--cluster: {exc}") from None
    return path


def known_gpu_classes(cluster: str) -> tuple[str, ...]:
    """The GPU classes a sweep on ``cluster`` may name: the registry's (``kernels.device``), and for SLURM
    also the classes its config defines (a site's own, with their ``device:`` facts)."""
    path = resolve_cluster_config(cluster)
    if path is None:
        return GPU_CLASSES
    from .slurm_config import load_slurm_config  # SLURM's config only for SLURM

    return GPU_CLASSES + tuple(c for c in load_slurm_config(path).classes if c not in GPU_CLASSES)


def check_cluster(cluster: str, gpu_classes: Sequence[str] | None, where: str = "--gpu-class") -> None:
    """What can be known of ``cluster`` before a sweep makes its folder: for SLURM, that its config serves
    ``gpu_classes`` and that this is a login node with their partitions (what ``open_cluster`` checks again
    when it starts), so a refusal leaves nothing behind. ``where`` the classes came from (the flag or the
    spec's field) leads a refusal. Nothing to check for the local cluster here."""
    path = resolve_cluster_config(cluster)
    if path is None:
        return
    from .slurm import _check_slurm
    from .slurm_config import load_slurm_config

    config = load_slurm_config(path)
    _check_slurm(config, config.select(list(gpu_classes) if gpu_classes else None, where))


def unhook_gc_diagnosis() -> None:
    """Take distributed's garbage-collection statistics hook out of this process.

    The scheduler runs in the sweep's process and hooks ``distributed.gc.GCDiagnosis`` into ``gc.callbacks``.
    Python ignores an exception raised inside a gc callback, so a Ctrl-C or SIGTERM whose handler ran there
    (``pipeline.interrupts`` raises ``Interrupted``) was lost and the sweep went on ("Exception ignored in
    GCDiagnosis._gc_callback ... KeyboardInterrupt: signal 15", once in CI, 2026-11-25). What the hook gives
    is log lines about GC pauses, which nothing here reads.
    """
    from distributed.gc import disable_gc_diagnosis

    disable_gc_diagnosis(force=True)


@contextmanager
def open_cluster(
    cluster: str | Any,
    gpu_classes: Sequence[str] | None,
    workers_per_class: int,
    workdir: Path,
    log: Callable[[str], None] = logger.info,
) -> Iterator[ClusterHandle]:
    """Start the cluster named by ``cluster`` (``local``, ``slurm`` or a YAML path), yield it, tear it down;
    or, for a Dask ``Client`` or cluster object, use it and leave it running
    (:mod:`launchtune.pipeline.cluster.attached`).

    ``gpu_classes`` limits a SLURM cluster to those classes (None: every class the config and spec name).
    ``workdir`` is a folder private to this sweep (logs, credentials).
    """
    if not isinstance(cluster, str):
        from .attached import attached_cluster

        with attached_cluster(cluster, log) as attached:
            yield attached
        return
    path = resolve_cluster_config(cluster)
    stack = ExitStack()
    try:
        if path is None:
            from .local import (
                open_local_cluster,  # each kind loads its machinery when asked
            )
            from .worker_signals import preloaded

            stack.enter_context(
                preloaded()
            )  # the workers leave Ctrl-C to the sweep (they share its terminal)
            stack.enter_context(spawned_ignore_sigint(workdir))  # ... from their first instruction
            opened = open_local_cluster(
                gpu_classes=gpu_classes, workdir=workdir, log=log, workers_per_class=workers_per_class
            )
        else:
            from .slurm import open_slurm_cluster  # dask-jobqueue only for SLURM

            opened = open_slurm_cluster(
                path, gpu_classes=gpu_classes, workers_per_class=workers_per_class, workdir=workdir, log=log
            )
        handle = stack.enter_context(opened)
        unhook_gc_diagnosis()
    except BaseException:
        with deferred_signals():
            stack.__exit__(*sys.exc_info())
        raise
    try:
        yield handle
    except BaseException:
        # Closing is never cut short by a (further) Ctrl-C: a half-closed cluster makes Dask's exit hook wait.
        with deferred_signals():
            if not stack.__exit__(*sys.exc_info()):
                raise
    else:
        with deferred_signals():
            stack.__exit__(None, None, None)
