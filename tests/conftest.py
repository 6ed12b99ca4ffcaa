"""Shared test set-up: the ``gpu`` marker skips where no CUDA GPU is visible; the Benchmark Hub's subset.

Tests read only what the repository holds: a user's clone has no lab folders beside it."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from launchtune.kernels.backend import gpu_count

REPO = Path(__file__).resolve().parents[1]
HUB = REPO / "data" / "benchmark_hub"

# Property tests in `make test` draw the same examples on every run and every machine (``derandomize``: the
# examples follow from each test's source), and read or write no example database, so a run on a fresh clone
# gives what the last one gave; every counterexample found is kept as an ``@example`` beside its test.
# ``make fuzz`` loads the ``fuzz`` profile instead: fresh randomness on every pass, passes repeated until its
# time is up or one fails (the failing example printed, to be kept as an ``@example``).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile(
    "fuzz",
    derandomize=False,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.load_profile(os.environ.get("LAUNCHTUNE_HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config, items):
    if gpu_count() > 0:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible (GPU tests run on the lent GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def hub_dir() -> Path:
    """The committed subset of the Benchmark Hub's convolution caches (data/benchmark_hub/README.md)."""
    return HUB


def call_main(
    main: Callable[[list[str]], int | None],
    args: Sequence[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 240,
) -> subprocess.CompletedProcess:
    """A command's ``main(args)`` in this process, answered as ``subprocess.run(..., capture_output=True)``
    answers: a ``CompletedProcess`` with the exit code (argparse's ``SystemExit`` included) and what the
    command printed on stdout and stderr.

    For a test of a command's message, exit code and files, not of the process (signals, an interpreter's
    start, imports in a fresh one): it saves the interpreter's start (seconds on a busy machine). ``env`` is
    set in ``os.environ`` and ``cwd`` made the working directory for the call only; a fresh interpreter's
    warning filters apply, its warnings printed on the captured stderr as they would be. A command still
    running after ``timeout`` seconds fails the test, as ``subprocess.run``'s timeout does (a timer signal
    interrupts it, a blocking ``open`` of a FIFO included).
    """
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.update(env or {})
        os.chdir(cwd or REPO)
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.resetwarnings()  # a fresh interpreter's filters, shown on (the captured) stderr
            for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
                warnings.simplefilter("ignore", category)
            warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
            warnings.showwarning = _show_warning
            old_alarm = signal.signal(signal.SIGALRM, _hung)
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's refusals and --help
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
                    code = 1
            except _Hung:
                hung = f"{' '.join(args)}: still running after {timeout} s"
                raise AssertionError(hung) from None
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old_alarm)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(list(args), code or 0, out.getvalue(), err.getvalue())


class _Hung(BaseException):
    """The timer's signal in :func:`call_main`: no ``Exception``, so the command's handlers let it pass."""


def _hung(signum, frame) -> None:
    raise _Hung


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
