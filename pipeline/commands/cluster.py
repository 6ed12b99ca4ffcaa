"""``launchtune cluster [CONFIG]``: check a SLURM cluster config and show what a sweep would submit.

Nothing is submitted and no scheduler starts. Without --dry-run it prints one line per GPU class (partition,
resources, walltime, device facts); with --dry-run it also prints each class's job script exactly as
dask-jobqueue writes it (the scheduler address, sweep name and sweep folder are placeholders).
"""

from __future__ import annotations

import argparse

from ..flags import names


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cluster",
        help="check a SLURM cluster config; --dry-run prints the job scripts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  launchtune cluster --dry-run\n"
        "  launchtune cluster --dry-run my-site.yaml --gpu-class v100,h100\n",
    )
    p.add_argument(
        "config",
        nargs="?",
        default="slurm",
        help="'slurm' (cluster_configs/slurm.yaml, the default) or a path to a copy of it",
    )
    p.add_argument(
        "--gpu-class",
        type=names,
        default=None,
        metavar="CLS[,CLS]",
        help="only these classes (default: every class in the config)",
    )
    p.add_argument("--dry-run", action="store_true", help="also print each class's job script")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..cluster import resolve_cluster_config
    from ..cluster.slurm import dry_run_scripts
    from ..cluster.slurm_config import load_slurm_config
    from ..errors import UserError

    path = resolve_cluster_config(args.config)
    if path is None:
        raise UserError("cluster: 'local' has no config to check; name 'slurm' or a SLURM config file")
    classes = args.gpu_class
    config = load_slurm_config(path)
    scripts = dry_run_scripts(path, classes)
    print(
        f"{path}: {len(scripts)} class(es); TLS {'on' if config.tls else 'OFF'}; "
        f"dashboard {config.dashboard or 'any free port'}; interface {config.interface or 'default'}"
    )
    header = (
        f"{'class':<8} {'partition':<12} {'gres':<8} {'cores':>5} {'memory':>7} {'walltime':>11} "
        f"{'fp64 GF/s':>9} {'GB/s':>6} {'mem GB':>6}"
    )
    print(header)
    for job, _ in scripts:
        d = job.device
        print(
            f"{job.gpu_class:<8} {job.partition:<12} {job.gres or '-':<8} {job.cores:>5} {job.memory:>7} "
            f"{job.walltime:>11} {d['peak_fp64_gflops']:>9g} {d['bandwidth_gbs']:>6g} {d['memory_gb']:>6g}"
        )
    if args.dry_run:
        for job, script in scripts:
            print(f"\n# --- job script for class {job.gpu_class} (partition {job.partition}) ---")
            print(script.rstrip())
    return 0
