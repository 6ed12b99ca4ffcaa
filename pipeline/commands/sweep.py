"""``launchtune sweep SPEC.yaml``: plan, measure on the cluster, merge, train, re-measure, report."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from launchtune.pipeline.flags import integer, number, whole
from launchtune.pipeline.paths import out_folder, results_root
from launchtune.pipeline.sweep.spec import SearchSpec, SweepSpec, check_gpu_class, limited, load_spec
from launchtune.pipeline.sweep.workloads import check_allow_flag, check_workload, workload_code

EPILOG = """\
examples:
  launchtune sweep cluster_configs/sweeps/default.yaml            # local cluster, results/default/
  launchtune sweep SPEC.yaml --samples 50 --out /tmp/try          # a quick look
  launchtune sweep SPEC.yaml --cluster slurm                      # one SLURM job per GPU class
  launchtune sweep SPEC.yaml --gpu-class v100 --force             # redo only the v100 partition
  launchtune sweep SPEC.yaml --allow-workload mypkg.wl:make       # a spec naming your own code
  launchtune sweep SPEC.yaml --strategy evolve --budget 100       # a search: 100 measurements
  launchtune sweep SPEC.yaml --gpu-class h200 --strategy transfer --budget 20 \
      --prior results/h100_sweep --out results/h200_transfer             # start from another class's data

A rerun of the same command skips finished shards (resume after a crash); a search's rerun replays what its
strategy was answered and measures only the rest of its budget. Output folder layout:
shards/gpu_class=<C>/shard-<batch>.parquet, merged/, models/, figures/, report.json, report.md,
tuning_table.json. Without --out, results go to results/<spec name>/ ($LAUNCHTUNE_RESULTS overrides results/).
"""


MAX_WORKERS_PER_CLASS = 4096  # SLURM jobs or local CPU workers of one class


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a sweep spec end to end",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("spec", type=Path, help="sweep spec YAML (see cluster_configs/sweeps/)")
    p.add_argument(
        "--cluster",
        default="local",
        help="'local' (default: one worker per visible GPU, else one CPU worker), 'slurm' "
        "(cluster_configs/slurm.yaml) or a cluster config YAML",
    )
    p.add_argument("--out", type=Path, help="sweep folder (default: results/<spec name>)")
    p.add_argument("--samples", type=whole, help="random samples per GPU class (overrides the spec)")
    p.add_argument("--gpu-class", help="only these classes, comma-separated (e.g. v100,h100)")
    p.add_argument(
        "--force",
        action="store_true",
        help="re-measure: with --gpu-class only those partitions, else the whole folder afresh",
    )
    p.add_argument("--seed", type=whole, help="sampling and training seed (overrides the spec)")
    p.add_argument(
        "--max-minutes",
        type=number(0, 10**7, open_below=True),
        help="stop measuring after this long and go on with what is measured (rerun to finish)",
    )
    p.add_argument(
        "--workers-per-class",
        type=integer(1, MAX_WORKERS_PER_CLASS),
        default=1,
        help="SLURM: jobs per GPU class (default 1); local: CPU workers where no GPU is visible "
        "(with GPUs the local cluster runs one worker per GPU)",
    )
    p.add_argument(
        "--allow-workload",
        action="append",
        default=[],
        metavar="MODULE:FACTORY",
        help="let the spec's workload be this module:factory, code the workers import and run (repeatable; "
        "installed 'launchtune.workloads' entry points and the registered names need no flag)",
    )
    p.add_argument(
        "--strategy",
        help="search instead of a random sample: this strategy (launchtune strategies --list; "
        "default: evolve) chooses what each GPU class measures, within --budget (spec key search.strategy)",
    )
    p.add_argument(
        "--budget", type=whole, help="measurements per GPU class of a search (spec key search.budget)"
    )
    p.add_argument(
        "--prior",
        action="append",
        metavar="PATH",
        help="recorded data for the search to start from (transfer): a sweep folder of other classes, a "
        "Kernel Tuner cache, or a folder of them (repeatable; spec key search.prior)",
    )
    p.set_defaults(func=run)


def _search_spec(args: argparse.Namespace, spec: SweepSpec) -> SweepSpec:
    """The spec's ``search`` block with the command line's --strategy, --budget and --prior over it,
    checked (strategy name, budget, Kernel Tuner only on a workload it can run) before anything starts."""
    from launchtune.pipeline.errors import UserError
    from launchtune.pipeline.sweep.spec import check_strategy

    old = spec.search
    if args.strategy is None and args.budget is None and args.prior is None:
        if old is None:
            return spec
        strategy, budget, prior = old.strategy, old.budget, list(old.prior)
        where = f"{args.spec}: search"
        where_strategy, where_budget = where + ".strategy", where + ".budget"
    else:
        if args.strategy is None and old is None:
            flag = "--budget" if args.budget is not None else "--prior"
            raise UserError(f"{flag}: needs --strategy (a search), or a search block in {args.spec}")
        if args.budget is None and old is None:
            raise UserError("--budget: a search needs a budget (--budget N measurements per GPU class)")
        given = args.strategy is not None  # "" is a strategy asked for, and refused by name
        strategy = check_strategy(args.strategy, "--strategy") if given else _old(old).strategy
        budget = args.budget if args.budget is not None else _old(old).budget
        prior = args.prior if args.prior is not None else list(old.prior if old else [])
        where_strategy = "--strategy" if given else f"{args.spec}: search.strategy"
        where_budget = "--budget" if args.budget is not None else f"{args.spec}: search.budget"
    budget = limited(budget, "search.budget", where_budget, 1)
    _check_kernel_tuner(strategy, spec, where_strategy)
    return dataclasses.replace(spec, search=SearchSpec(strategy, budget, tuple(prior)))


def _old(search: SearchSpec | None) -> SearchSpec:
    assert search is not None  # the caller's checks: the flag it falls back from is set, or this is
    return search


def _check_kernel_tuner(strategy: str, spec: SweepSpec, where: str) -> None:
    """``kt:<name>`` runs Kernel Tuner's ``tune_kernel`` live: only on a ``kernel`` workload, whose CUDA
    source Kernel Tuner compiles itself, and only with one of its strategies."""
    from launchtune.pipeline.errors import UserError
    from launchtune.pipeline.strategies.kernel_tuner_baseline import PREFIX, kt_strategy_names

    if not strategy.startswith(PREFIX):
        return
    if spec.workload != "kernel":
        raise UserError(
            f"{where}: {strategy} runs Kernel Tuner on a kernel workload's own source; workload "
            f"{spec.workload!r} is not one Kernel Tuner can run (use one of our strategies)"
        )
    names = kt_strategy_names()
    if strategy[len(PREFIX) :] not in names:
        raise UserError(
            f"{where}: unknown Kernel Tuner strategy {strategy!r} (choose kt: and one of {', '.join(names)})"
        )


def _check_search(spec: SweepSpec, source: Path, prior_from_flag: bool) -> list:
    """A search's budget against the space where it is known here (a replayed dataset), and its prior, all
    read and checked before any cluster starts."""
    from launchtune.pipeline.errors import UserError
    from launchtune.pipeline.strategies import NEEDS_PRIOR
    from launchtune.pipeline.sweep.priors import check_params, constants_of, load_priors

    assert spec.search is not None
    where_prior = "--prior" if prior_from_flag else f"{source}: search.prior"
    prior = load_priors(spec.search.prior, spec, where_prior)
    if spec.search.strategy in NEEDS_PRIOR and not prior:
        raise UserError(
            f"{where_prior}: {spec.search.strategy} starts from other classes' or devices' data; name some "
            "(--prior SWEEP_FOLDER or Kernel Tuner caches)"
        )
    if spec.workload == "replay":
        from launchtune.pipeline.sweep.rehearsal import make_workload

        try:
            replay = make_workload(spec.case, spec.size, **(spec.options or {}))
        except Exception:  # noqa: BLE001  (the workload's own errors are reported where it is built)
            return prior
        size = len(replay.candidates())
        if spec.search.budget > size:
            raise UserError(
                f"--budget: {spec.search.budget} measurements is more than the space holds ({size} "
                "configurations)"
            )
        values = {p.name: p.values for p in replay.space().params}
        check_params(prior, replay.space().names, where_prior, constants_of(values))
    return prior


def _check_this_machine(spec: SweepSpec, source: Path, classes: list[str] | None) -> None:
    """The local cluster runs on this machine: a spec that needs a GPU it lacks is one line before anything
    starts (issue 14), not a traceback from the first worker after the cluster started."""
    import os

    from launchtune.kernels.device import visible_gpu_names
    from launchtune.kernels.workload import GPU_ONLY
    from launchtune.pipeline.cluster.local import plan_local_workers
    from launchtune.pipeline.errors import UserError

    gpus = visible_gpu_names()
    if spec.workload in GPU_ONLY and not gpus:
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


def _searching(args: argparse.Namespace, spec: SweepSpec) -> bool:
    return spec.search is not None or args.strategy is not None


def run(args: argparse.Namespace) -> int:
    from launchtune.pipeline.cluster import check_cluster, known_gpu_classes
    from launchtune.pipeline.cluster.waits import wait_limit
    from launchtune.pipeline.errors import UserError
    from launchtune.pipeline.sweep.run import run_sweep

    spec = load_spec(args.spec)
    allowed = [check_allow_flag(v) for v in args.allow_workload]
    check_workload(spec.workload, allowed, f"{args.spec}: workload")  # before the cluster imports anything
    for where, target in workload_code(spec):  # Python a kernel spec names: allowed as a workload is
        check_workload(target, allowed, where)
    if args.samples is not None:
        spec = dataclasses.replace(spec, samples=limited(args.samples, "samples", "--samples", 0))
    if (
        spec.samples == 0
        and not {"per_kernel_exhaustive", "exhaustive"} & set(spec.samplers)
        and not _searching(args, spec)
    ):
        where = "--samples" if args.samples is not None else f"{args.spec}: samples"
        raise UserError(f"{where}: 0 random samples and no exhaustive sampler: nothing to measure")
    if args.seed is not None:
        spec = dataclasses.replace(spec, seed=limited(args.seed, "seed", "--seed", 0))
    spec = _search_spec(args, spec)
    prior = []
    if spec.search is not None:
        if args.max_minutes is not None:
            raise UserError("--max-minutes: a search stops at its budget (--budget), not at a time limit")
        prior = _check_search(spec, args.spec, args.prior is not None)
    wait_limit(args.cluster)  # a bad $LAUNCHTUNE_WAIT_S is one line before anything starts
    known = known_gpu_classes(args.cluster)  # before any folder is made or cluster started
    for c in spec.gpu_classes or ():
        check_gpu_class(c, f"{args.spec}: gpu_classes", known)
    classes = None
    if args.gpu_class:
        classes = [check_gpu_class(c.strip(), "--gpu-class", known) for c in args.gpu_class.split(",")]
    if args.cluster == "local":
        _check_this_machine(spec, args.spec, classes)
    check_cluster(args.cluster, classes or spec.gpu_classes)  # SLURM's classes and partitions, before --out
    out = out_folder(args.out) if args.out else spec.default_out()
    print(
        f"sweep {spec.name}: {spec.workload}/{spec.case}/{spec.size} -> {out}"
        f"  (results root {results_root()})",
        flush=True,
    )
    run_sweep(
        spec,
        out,
        args.cluster,
        classes,
        args.force,
        args.workers_per_class,
        max_minutes=args.max_minutes,
        prior=prior,
    )
    return 0
