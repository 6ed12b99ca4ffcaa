"""``launchtune <command>`` (the console script) or ``launchtune <command>``: one module per command
under :mod:`launchtune.pipeline.commands`.

Each command module has ``add_parser(subparsers)`` (which sets ``func``) and stays small; a new command is one
new file and one line in ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from launchtune.kernels.usage import Parser

from .errors import UserError, path_error_line
from .interrupts import Interrupted, exit_on_signal, received, signals_interrupt
from .logs import LEVEL_ENV, level_from
from .logs import configure as configure_logging

COMMANDS = [
    # module names under launchtune.pipeline.commands; add yours on its own line
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
    "examples",
]


def build_parser() -> argparse.ArgumentParser:
    from .version import __version__

    parser = Parser(
        prog="launchtune",
        description="Plan, run, store and learn from GPU launch-parameter sweeps.",
        epilog=f"${LEVEL_ENV} (DEBUG, INFO, WARNING, ERROR) sets how much is printed where -v/-q are not "
        "given.",
    )
    parser.add_argument("--version", action="version", version=f"launchtune {__version__}")
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument("-v", "--verbose", action="count", default=0, help="print debugging messages too")
    loudness.add_argument(
        "-q",
        "--quiet",
        action="count",
        default=0,
        help="fewer messages: the library's warnings and errors only (-qq: errors only)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"launchtune.pipeline.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        level = level_from(args.verbose, args.quiet)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    configure_logging(level)  # the library's messages, one plain line each on stdout, as the commands print
    with signals_interrupt():
        try:
            return int(args.func(args) or 0)
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt as exc:
            return _interrupted(exc.signum if isinstance(exc, Interrupted) else received())
        except TimeoutError as exc:  # a wait of a library of ours (Dask's) that names what it waited for
            if received() is not None:
                return _interrupted(received())
            print(f"error: timed out: {exc}", file=sys.stderr)
            return 1
        except OSError as exc:  # a file that cannot be written (a full or read-only disk): one line naming it
            if received() is not None:
                return _interrupted(received())
            line = path_error_line(exc)
            if line is None:
                raise
            print(f"error: {line}", file=sys.stderr)
            return 2
        except Exception:
            if received() is not None:  # what the interrupt broke on its way (a worker it stopped)
                return _interrupted(received())
            raise


def run() -> None:
    """The console entry point (``launchtune``, ``python -m launchtune``): :func:`main`, then the process's
    exit, during which a signal is still one line and exit 130 (:func:`interrupts.exit_on_signal`)."""
    code = main()
    exit_on_signal()
    sys.exit(code)


def _interrupted(signum: int | None) -> int:
    """One line naming the signal, exit 130 (128 + SIGINT) for Ctrl-C and SIGTERM alike: the SLURM cluster
    turns SIGTERM and SIGHUP into a plain KeyboardInterrupt too (``launchtune.pipeline.cluster.slurm``)."""
    signum = signum or signal.SIGINT
    print(
        f"interrupted ({signal.Signals(signum).name}): files already written are kept, none half-written; "
        "run the same command again to go on",
        file=sys.stderr,
    )
    return 130
