"""``python -m pipeline sweep SPEC.yaml``: plan, measure on the cluster, merge, train, re-measure, report."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from pipeline.flags import integer, number, whole
from pipeline.paths import out_folder, results_root
from pipeline.sweep.spec import SweepSpec, check_gpu_class, limited, load_spec
from pipeline.sweep.workloads import check_allow_flag, check_workload, workload_code

EPILOG = """\
examples:
  python -m pipeline sweep cluster_configs/sweeps/default.yaml            # local cluster, results/default/
  python -m pipeline sweep SPEC.yaml --samples 50 --out /tmp/try          # a quick look
  python -m pipeline sweep SPEC.yaml --cluster slurm                      # one SLURM job per GPU class
  python -m pipeline sweep SPEC.yaml --gpu-class v100 --force             # redo only the v100 partition
  python -m pipeline sweep SPEC.yaml --allow-workload mypkg.wl:make       # a spec naming your own code

A rerun of the same command skips finished shards (resume after a crash). Output folder layout:
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
    p.set_defaults(func=run)


def _check_this_machine(spec: SweepSpec, source: Path, classes: list[str] | None) -> None:
    """The local cluster runs on this machine: a spec that needs a GPU it lacks is one line before anything
    starts (issue 14), not a traceback from the first worker after the cluster started."""
    import os

    from kernels.device import visible_gpu_names
    from kernels.workload import GPU_ONLY
    from pipeline.cluster.local import plan_local_workers
    from pipeline.errors import UserError

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


def run(args: argparse.Namespace) -> int:
    from pipeline.cluster import known_gpu_classes
    from pipeline.cluster.waits import wait_limit
    from pipeline.errors import UserError
    from pipeline.sweep.run import run_sweep

    spec = load_spec(args.spec)
    allowed = [check_allow_flag(v) for v in args.allow_workload]
    check_workload(spec.workload, allowed, f"{args.spec}: workload")  # before the cluster imports anything
    for where, target in workload_code(spec):  # Python a kernel spec names: allowed as a workload is
        check_workload(target, allowed, where)
    if args.samples is not None:
        spec = dataclasses.replace(spec, samples=limited(args.samples, "samples", "--samples", 0))
    if spec.samples == 0 and not {"per_kernel_exhaustive", "exhaustive"} & set(spec.samplers):
        where = "--samples" if args.samples is not None else f"{args.spec}: samples"
        raise UserError(f"{where}: 0 random samples and no exhaustive sampler: nothing to measure")
    if args.seed is not None:
        spec = dataclasses.replace(spec, seed=limited(args.seed, "seed", "--seed", 0))
    wait_limit(args.cluster)  # a bad $LAUNCHTUNE_WAIT_S is one line before anything starts
    known = known_gpu_classes(args.cluster)  # before any folder is made or cluster started
    for c in spec.gpu_classes or ():
        check_gpu_class(c, f"{args.spec}: gpu_classes", known)
    classes = None
    if args.gpu_class:
        classes = [check_gpu_class(c.strip(), "--gpu-class", known) for c in args.gpu_class.split(",")]
    if args.cluster == "local":
        _check_this_machine(spec, args.spec, classes)
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
    )
    return 0
