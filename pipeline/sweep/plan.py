"""A sweep's plan: the spec with the command line's overrides, every flag and key checked once, before any
folder is made or cluster started. Layers below (``sweep.run``, the workers, the strategies) trust it.

``launchtune sweep`` and the Python API (``launchtune.sweep``, ``launchtune.tune_kernel``) both build one
with :func:`plan_sweep`; a value's range is checked against ``store.spec.LIMITS``, the one table of maxima.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launchtune.kernels.device import visible_gpu_names

from ..cluster import check_cluster, known_gpu_classes
from ..cluster.local import plan_local_workers
from ..cluster.waits import gone_limit, wait_limit
from ..errors import UserError
from ..paths import out_folder
from ..store.shipped import spec_path
from ..store.spec import (
    DEFAULT_BUDGET,
    SearchSpec,
    SweepSpec,
    check_gpu_class,
    limited,
    load_spec,
)
from ..store.workloads import check_allow_flag, check_workload, declared, workload_code
from ..strategies import NEEDS_PRIOR, STRATEGIES
from ..strategies.kernel_tuner_baseline import PREFIX, kt_strategy_names
from .priors import load_priors

MAX_MINUTES = 10**7  # the --max-minutes flag's own bound (pipeline/commands/sweep.py)


@dataclass(frozen=True)
class SweepPlan:
    """What ``sweep.run.run_plan`` runs: a checked spec, where it writes, on which cluster and classes."""

    spec: SweepSpec
    out: Path
    cluster: Any = "local"  # "local", "slurm", a cluster config path, or a user's Dask Client or cluster
    classes: list[str] | None = None  # only these GPU classes (--gpu-class)
    force: bool = False
    workers_per_class: int = 1
    max_minutes: float | None = None
    prior: list[Any] = dataclasses.field(default_factory=list)  # the search's recorded data, loaded


def plan_sweep(
    spec: Path | SweepSpec,
    *,
    cluster: Any = "local",
    out: Path | None = None,
    samples: int | None = None,
    gpu_classes: Sequence[str] | None = None,
    force: bool = False,
    seed: int | None = None,
    max_minutes: float | None = None,
    workers_per_class: int = 1,
    allow_workload: Sequence[str] = (),
    strategy: str | None = None,
    budget: int | None = None,
    prior: Sequence[str] | None = None,
    train_models: bool | None = None,
    remeasure: bool | None = None,
) -> SweepPlan:
    """The spec (a path, or one already loaded) with these overrides, checked; each error names the flag
    (``--budget``) or the spec's key (``SPEC: search.budget``) it came from."""
    source = spec.source if isinstance(spec, SweepSpec) else spec_path(spec)  # a file, or a shipped name
    spec = spec if isinstance(spec, SweepSpec) else load_spec(source)
    allowed = [check_allow_flag(v) for v in allow_workload]
    check_workload(spec.workload, allowed, f"{source}: workload")  # before the cluster imports anything
    for where, target in workload_code(spec):  # Python a kernel spec names: allowed as a workload is
        check_workload(target, allowed, where)
    if samples is not None:
        spec = dataclasses.replace(spec, samples=limited(samples, "samples", "--samples", 0))
    searching = spec.search is not None or strategy is not None
    if (
        spec.samples == 0
        and not {"per_kernel_exhaustive", "exhaustive"} & set(spec.samplers)
        and not searching
    ):
        where = "--samples" if samples is not None else f"{source}: samples"
        raise UserError(f"{where}: 0 random samples and no exhaustive sampler: nothing to measure")
    if seed is not None:
        spec = dataclasses.replace(spec, seed=limited(seed, "seed", "--seed", 0))
    spec = _search_spec(spec, source, strategy, budget, prior)
    if train_models is not None:
        spec = dataclasses.replace(spec, train_models=train_models)
    if remeasure is not None:
        spec = dataclasses.replace(spec, remeasure=remeasure)
    if max_minutes is not None and not (  # the API's as the flag's: NaN compares false with every bound
        isinstance(max_minutes, int | float)
        and not isinstance(max_minutes, bool)
        and math.isfinite(max_minutes)
        and 0 < max_minutes <= MAX_MINUTES
    ):
        raise UserError(
            f"--max-minutes: must be a number more than 0 and at most {MAX_MINUTES:,} (got {max_minutes!r})"
        )
    loaded: list[Any] = []
    if spec.search is not None:
        if max_minutes is not None:
            raise UserError("--max-minutes: a search stops at its budget (--budget), not at a time limit")
        loaded = _load_prior(spec, source, prior is not None)
    limited(workers_per_class, "workers_per_class", "--workers-per-class", 1)
    named_cluster = isinstance(cluster, str | Path)
    classes = _gpu_classes(cluster, spec, source, gpu_classes)
    return SweepPlan(
        spec=spec,
        out=out_folder(out) if out else spec.default_out(),
        cluster=str(cluster) if named_cluster else cluster,
        classes=classes,
        force=force,
        workers_per_class=workers_per_class,
        max_minutes=max_minutes,
        prior=loaded,
    )


def _gpu_classes(
    cluster: Any, spec: SweepSpec, source: Path | str, gpu_classes: Sequence[str] | None
) -> list[str] | None:
    """``--gpu-class``'s classes (None: the spec's); where the project names the cluster (``local``,
    ``slurm``, a config file), first its wait settings, then the spec's and these classes against what it
    serves, before any folder is made."""
    named_cluster = isinstance(cluster, str | Path)
    if named_cluster:
        wait_limit(str(cluster))  # a bad $LAUNCHTUNE_WAIT_S is one line before anything starts
        gone_limit()  # and a bad $LAUNCHTUNE_GONE_S
    classes = [c.strip() for c in gpu_classes] if gpu_classes else None
    if not named_cluster:  # a user's own Dask cluster serves whichever classes its workers name
        return classes
    known = known_gpu_classes(str(cluster))
    for c in spec.gpu_classes or ():
        check_gpu_class(c, f"{source}: gpu_classes", known)
    for c in classes or ():
        check_gpu_class(c, "--gpu-class", known)
    if cluster == "local":
        _check_this_machine(spec, source, classes)
    # SLURM's classes, sbatch and partitions
    check_cluster(
        str(cluster), classes or spec.gpu_classes, "--gpu-class" if classes else f"{source}: gpu_classes"
    )
    return classes


def _search_spec(
    spec: SweepSpec, source: Path | str, strategy: str | None, budget: int | None, prior: Sequence[str] | None
) -> SweepSpec:
    """The spec's ``search`` block with --strategy, --budget and --prior over it, checked once: the strategy
    exists (ours, ``default``, or Kernel Tuner's on a workload it can run), the budget within its limit."""
    old = spec.search
    if strategy is None and budget is None and prior is None:
        if old is None:
            return spec
        strategy, budget, prior = old.strategy, old.budget, list(old.prior)
        where_strategy, where_budget = f"{source}: search.strategy", f"{source}: search.budget"
    else:
        if strategy is None and old is None:
            flag = "--budget" if budget is not None else "--prior"
            raise UserError(f"{flag}: needs --strategy (a search), or a search block in {source}")
        where_strategy = "--strategy" if strategy is not None else f"{source}: search.strategy"
        where_budget = "--budget" if budget is not None else f"{source}: search.budget"
        strategy = strategy if strategy is not None else old.strategy  # type: ignore[union-attr]
        budget = budget if budget is not None else old.budget if old else DEFAULT_BUDGET
        prior = list(prior) if prior is not None else list(old.prior if old else [])
    _check_strategy(strategy, spec, where_strategy)
    budget = limited(budget, "search.budget", where_budget, 1)
    return dataclasses.replace(spec, search=SearchSpec(strategy, budget, tuple(prior)))


def _check_strategy(strategy: Any, spec: SweepSpec, where: str) -> None:
    """A strategy a search can run: ``default``, one of ours, or ``kt:<name>`` (Kernel Tuner's
    ``tune_kernel`` on a ``kernel`` workload's own source, with one of its strategies)."""
    if not isinstance(strategy, str) or not strategy.startswith(PREFIX):
        if strategy == "default" or strategy in STRATEGIES:
            return
        ours = ", ".join(["default", *STRATEGIES])
        raise UserError(
            f"{where}: unknown strategy {strategy!r} (choose one of {ours}, or kt:<Kernel Tuner strategy>)"[
                :400
            ]
        )
    if not declared(spec.workload).kernel_spec:
        raise UserError(
            f"{where}: {strategy} runs Kernel Tuner on a kernel workload's own source; workload "
            f"{spec.workload!r} is not one Kernel Tuner can run (use one of our strategies)"
        )
    names = kt_strategy_names()
    if strategy[len(PREFIX) :] not in names:
        raise UserError(
            f"{where}: unknown Kernel Tuner strategy {strategy!r} (choose kt: and one of {', '.join(names)})"
        )


def _load_prior(spec: SweepSpec, source: Path | str, prior_from_flag: bool) -> list[Any]:
    """A search's recorded data, read and checked before any cluster starts (its parameters against the
    plan's are checked once the plan is made, in ``sweep.run``)."""
    assert spec.search is not None
    where_prior = "--prior" if prior_from_flag else f"{source}: search.prior"
    prior = load_priors(spec.search.prior, spec, where_prior)
    if spec.search.strategy in NEEDS_PRIOR and not prior:
        raise UserError(
            f"{where_prior}: {spec.search.strategy} starts from other classes' or devices' data; name some "
            "(--prior SWEEP_FOLDER or Kernel Tuner caches)"
        )
    return prior


def _check_this_machine(spec: SweepSpec, source: Path | str, classes: list[str] | None) -> None:
    """The local cluster runs on this machine: a spec that needs a GPU it lacks is one line before anything
    starts (issue 14), not a traceback from the first worker after the cluster started."""
    gpus = visible_gpu_names()
    if declared(spec.workload).gpu_only and not gpus:
        raise UserError(
            f"{source}: workload: {spec.workload} compiles and runs CUDA and no GPU is visible on this "
            "machine; run it where one is (a GPU node, or --cluster slurm)"
        )
    if spec.backend == "cupy" and not gpus:
        raise UserError(
            f"{source}: backend: cupy needs a GPU and none is visible on this machine; run it where one is "
            "(a GPU node, or --cluster slurm), or on the CPU with backend: numpy and a CPU-sized spec "
            "(cluster_configs/sweeps/cfd_inlet_cpu.yaml)"
        )
    served = sorted(
        {w["gpu_class"] for w in plan_local_workers(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))}
    )
    where = "--gpu-class" if classes else f"{source}: gpu_classes"
    for c in classes or spec.gpu_classes or ():
        if c not in served:
            raise UserError(
                f"{where}: GPU class {c!r} is not served by the local cluster (this machine has: "
                f"{', '.join(served)}); "
                "use --cluster slurm or CONFIG.yaml for other classes"
            )
