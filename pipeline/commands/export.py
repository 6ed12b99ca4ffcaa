"""``python -m pipeline export --format kernel-tuner SWEEP_DIR OUT``: a sweep's measured configurations (its
``merged/`` data; or any dataset the strategies read) as a Kernel Tuner cache file, one per GPU class, for
Kernel Tuner's simulation mode and the Benchmark Hub's tools. ``pipeline.strategies.kt_cache`` says what an
entry holds."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pipeline.errors import UserError

FORMATS = ("kernel-tuner",)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export",
        help="write recorded data in another tool's format (a Kernel Tuner cache)",
        description=__doc__,
        epilog="example: python -m pipeline export --format kernel-tuner data/cfd/h100/sweep_paper "
        "h100.json.gz",
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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipeline.strategies.datasets import load_datasets
    from pipeline.strategies.kt_cache import write_cache

    datasets = load_datasets(args.source)
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
