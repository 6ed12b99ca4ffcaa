"""``launchtune merge DIR``: gather a sweep's shards into DIR/merged (Parquet, by GPU class)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "merge",
        help="merge a sweep's shards",
        description=__doc__ + "\n\nA corrupt shard is "
        "named in the error; delete it and rerun the sweep to re-measure that batch.",
    )
    p.add_argument("dir", type=Path, help="sweep folder (holds shards/)")
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="merge even where planned samples are missing (a time-limited sweep); they are counted",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..jsonio import check_input
    from ..store.folder import SweepFolder
    from ..store.shards import merge

    check_input(args.dir, "sweep folder", file_ok=False)  # missing, a file, a loop: each its own line
    table = merge(args.dir, allow_missing=args.allow_missing)
    folder = SweepFolder(args.dir)
    print(f"merged {table.num_rows} rows from {len(folder.shards())} shards into {folder.merged_dir}")
    return 0
