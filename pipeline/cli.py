"""``python -m pipeline <command>``: one module per command under :mod:`pipeline.commands`.

Each command module has ``add_parser(subparsers)`` (which sets ``func``) and stays small; a new command is one
new file and one line in ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from pipeline.errors import UserError

COMMANDS = [
    # module names under pipeline.commands; add yours on its own line
    "sweep",
    "merge",
    "train",
    "report",
    "cluster",
    "streams",
    "strategies",
    "export",
    "combine",
    "notebooks",
    "readme",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline",
        description="Plan, run, store and learn from GPU launch-parameter sweeps.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"pipeline.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
