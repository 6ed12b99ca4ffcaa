"""``launchtune export --format kernel-tuner SWEEP_DIR OUT``: a sweep's measured configurations (its
``merged/`` data; or any dataset the strategies read) as a Kernel Tuner cache file, one per GPU class, for
Kernel Tuner's simulation mode and the Benchmark Hub's tools. ``pipeline.strategies.kt_cache`` says what an
entry holds."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import flags
from ..errors import UserError

FORMATS = ("kernel-tuner", "c-header")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export",
        help="write recorded data in another tool's format (a Kernel Tuner cache)",
        description=__doc__,
        epilog="example: launchtune export --format kernel-tuner data/cfd/h100/sweep_paper h100.json.gz",
    )
    p.add_argument("--format", required=True, choices=FORMATS, help="output format")
    p.add_argument(
        "source",
        metavar="SWEEP_DIR",
        help="a sweep folder (or its merged/ folder, a Parquet file, a Kernel Tuner cache)",
    )
    p.add_argument(
        "out",
        metavar="OUT",
        help="the cache file (.json or .json.gz) for one GPU class; otherwise a folder that gets "
        "<class>.json.gz",
    )
    p.add_argument(
        "--objective",
        type=flags.objective,
        default=None,
        metavar="NAME:max|min",
        help="the objective of a Kernel Tuner cache whose direction is not known (time and energy are lower "
        "is better, GFLOP/s and GB/s higher): e.g. 'score:max'",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..store.ownership import refuse_inside_project_folder

    refuse_inside_project_folder(args.out, "export")  # before anything is read or written
    if args.format == "c-header":
        return write_c_header(Path(args.source), Path(args.out))
    from ..store.datasets import load_datasets
    from ..strategies.kt_cache import write_cache

    datasets = load_datasets(args.source, args.objective)
    out = Path(args.out)
    if out.name.endswith((".json", ".json.gz")):
        if len(datasets) != 1:
            names = ", ".join(d.name for d in datasets)
            raise UserError(
                f"{args.source}: holds {len(datasets)} GPU classes ({names}); give a folder as OUT"
            )
        paths = [write_cache(datasets[0], out)]
    else:
        paths = [write_cache(d, out / f"{d.name}.json.gz") for d in datasets]
    for d, path in zip(datasets, paths, strict=True):
        print(json.dumps({"exported": str(path), "gpu": d.name, "configurations": len(d.frame)}))
    return 0


def write_c_header(sweep_dir: Path, out: Path) -> int:
    """The tuning table of a ``kernel`` sweep (or a combined folder of them) as a C header at ``out``."""
    from launchtune.kernels import tuning_table
    from launchtune.kernels.atomic import write_text
    from launchtune.kernels.kernel.header import HeaderError, Pick, render_header
    from launchtune.kernels.kernel.spec import load_kernel_spec
    from launchtune.kernels.workload import WorkloadError

    from ..store.folder import SweepFolder
    from ..store.workloads import declared

    if out.suffix not in (".h", ".hpp", ".cuh"):
        raise UserError(f"{out}: a C header's name ends in .h, .hpp or .cuh")
    folder = SweepFolder(sweep_dir)
    spec, _ = folder.read_spec()
    if not declared(spec.workload).kernel_spec:
        raise UserError(f"{sweep_dir}: a {spec.workload!r} sweep; the C header is for kernel sweeps")
    table = folder.read_tuning_table()
    if table is None:
        raise UserError(f"{sweep_dir}: no tuning_table.json (run `launchtune report {sweep_dir}` first)")
    try:
        kernel = load_kernel_spec(spec.options["spec"])
        problem = kernel.problem(spec.size)
    except WorkloadError as exc:
        raise UserError(f"{sweep_dir}: the sweep's kernel spec: {exc}") from None
    where = tuning_table.in_folder(folder.path)
    try:
        entries = tuning_table.sweep_entries(table, where)
    except tuning_table.TableError as exc:
        raise UserError(str(exc)) from None
    # a null best reaches render_header as it is: it names the entry ("expected a configuration")
    picks = [Pick(e["gpu_class"], e["best"], e.get("best_ms")) for e in entries]  # type: ignore[arg-type]
    default = (entries[0].get("default") if entries else None) or kernel.default
    try:
        text = render_header(kernel, problem, picks, default, origin=str(sweep_dir))
    except HeaderError as exc:
        raise UserError(f"{where}: {exc}") from None
    write_text(out, text)
    print(json.dumps({"exported": str(out), "gpu_classes": [p.gpu_class for p in picks]}))
    return 0
