"""``launchtune readme [--check]``: render the measured tables of README.md and docs/ from committed
data (the generated blocks of ``pipeline.results.readme``); ``--check`` only compares and exits 1 on drift."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from launchtune.pipeline.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "readme",
        help="regenerate the README's measured tables from committed data (--check: compare only)",
        description=__doc__,
        epilog="example: launchtune readme --check   # what the test suite runs",
    )
    p.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 naming every block that differs"
    )
    p.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this checkout)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from launchtune.pipeline.results.readme import ReadmeError, differences, rewrite

    try:
        if args.check:
            diffs = differences(args.root)
            for rel, diff in diffs.items():
                print(f"{rel}: generated blocks differ from the data (run `launchtune readme`)")
                print(diff)
            if not diffs:
                print("generated blocks match the committed data")
            return 1 if diffs else 0
        changed = rewrite(args.root)
    except ReadmeError as exc:
        raise UserError(str(exc)) from exc
    print("rewrote " + ", ".join(changed) if changed else "nothing to rewrite", file=sys.stderr)
    return 0
