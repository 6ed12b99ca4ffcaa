"""``launchtune report DIR``: write DIR/report.json, report.md, figures/*.png and tuning_table.json.

Re-measured times (predicted best and default) come from DIR/validation.json, which the sweep writes while its
cluster is up; models are loaded with skops and a fixed list of trusted types (a file with others is refused).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="write the report of a trained sweep",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dir", type=Path, help="sweep folder (holds merged/ and models/)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..jsonio import check_input
    from ..results.report import build_report

    check_input(args.dir, "sweep folder", file_ok=False)  # missing, a file, a loop: each its own line
    build_report(args.dir)
    print(f"report: {args.dir / 'report.md'}")
    return 0
