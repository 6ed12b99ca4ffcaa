"""Benchmarks a user reruns on their own machine: each measures the project on a GPU (or its CPU stand-in).

Run each from the repository root as ``python -m benchmarks.<name>`` (``--help`` says what it measures) or
``bash benchmarks/<name>.sh``. Each has a CPU smoke test (``tests/benchmarks/``) and uses only public names of
``pipeline`` and ``kernels``. The harnesses of finished experiments are in ``lab/``.

Each module ends in ``run_main(main)``: a user mistake (the project's ``UserError``, or a path that cannot be
read or written) is one line and exit 2, as every ``launchtune`` command gives it; anything else is a bug and
keeps its traceback. A ``*_gpu.sh`` script says how a CPU runs it as far as one can in a ``# Dry run:`` line
of its header (``tests/benchmarks/test_dry_run.py`` runs every one that way).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

from launchtune.pipeline.errors import UserError, path_error_line


def run_main(main: Callable[[], int | None]) -> NoReturn:
    """Call a benchmark's ``main`` and exit with its code; a user mistake is ``error: MESSAGE`` on stderr and
    exit 2 instead of a traceback (the rule of ``launchtune.pipeline.cli``, in one place for every
    benchmark)."""
    try:
        code = main()
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    except OSError as exc:  # a file named on the command line that is missing or cannot be written
        line = path_error_line(exc)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        raise SystemExit(2) from None
    raise SystemExit(code or 0)
