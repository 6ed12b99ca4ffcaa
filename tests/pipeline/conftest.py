"""Helpers for pipeline tests: a spec writer and a runner of the real CLI in a subprocess."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
FAKE = "tests.pipeline.fake_workload:make_workload"


def base_spec(**overrides) -> dict:
    spec = {
        "name": "fake",
        "workload": FAKE,
        "case": "demo",
        "size": "8x4",
        "backend": "numpy",
        "samples": 30,
        "samplers": ["random"],
        "batch_size": 10,
        "repeats": 1,
        "validate": {"pool": 100, "top_k": 2, "repeats": 2},
        "train": {"hidden_layers": [8], "max_epochs": 20},
    }
    spec.update(overrides)
    return spec


@pytest.fixture
def write_spec(tmp_path):
    def write(name: str = "spec.yaml", **overrides) -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(base_spec(**overrides)))
        return path

    return write


def run_cli(
    *args: str,
    cwd: Path | None = None,
    env: dict | None = None,
    timeout: float = 240,
    background: bool = False,
    allow_fake: bool = True,
    new_session: bool = False,
):
    """``launchtune ARGS`` from the repository, results root in ``cwd`` (a tmp folder).

    A ``sweep`` allows the fake workload on its command line (``--allow-workload``), as a user allows their
    own unpackaged workload; ``allow_fake=False`` leaves the flag out. ``new_session`` (with ``background``):
    its own process group, which a test signals as a terminal's Ctrl-C signals its foreground group
    (``os.killpg``).
    """
    if allow_fake and args[:1] == ("sweep",) and "--help" not in args:
        args = (*args, "--allow-workload", FAKE)
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))  # keep a --target site
    full_env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **(env or {})}
    if cwd is not None:
        full_env.setdefault("LAUNCHTUNE_RESULTS", str(Path(cwd) / "results"))
    cmd = [sys.executable, "-m", "launchtune", *args]
    if background:
        return subprocess.Popen(
            cmd,
            cwd=cwd or REPO,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=new_session,
        )
    return subprocess.run(cmd, cwd=cwd or REPO, env=full_env, capture_output=True, text=True, timeout=timeout)


def run_cli_here(
    *args: str,
    cwd: Path | None = None,
    env: dict | None = None,
    allow_fake: bool = True,
    timeout: float = 240,
) -> subprocess.CompletedProcess:
    """``launchtune ARGS`` in this process (:func:`launchtune.pipeline.cli.main`), answered as :func:`run_cli`
    answers: a ``CompletedProcess`` with the exit code and what the command printed on stdout and stderr.

    For a test of a command's message and exit code (a refusal before any cluster starts), not of the process
    (signals, a hang, an interpreter's start): it saves the interpreter's start (seconds on a busy machine).
    ``env`` is set in ``os.environ`` and ``cwd`` made the working directory for the call only; a fresh
    interpreter's warning filters apply, its warnings printed on the captured stderr as they would be. A
    command still running after ``timeout`` seconds fails the test, as :func:`run_cli`'s timeout does (a
    timer signal interrupts it, a blocking ``open`` of a FIFO included).
    """
    from launchtune.pipeline import cli

    if allow_fake and args[:1] == ("sweep",) and "--help" not in args:
        args = (*args, "--allow-workload", FAKE)
    extra = {**(env or {})}
    if cwd is not None:
        results = os.environ.get("LAUNCHTUNE_RESULTS", str(Path(cwd) / "results"))
        extra.setdefault("LAUNCHTUNE_RESULTS", results)
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    logger = logging.getLogger("launchtune")
    saved_handlers, saved_level = list(logger.handlers), logger.level
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.update(extra)
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
                code = cli.main(list(args))
            except SystemExit as exc:  # argparse's refusals and --help
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
                    code = 1
            except _Hung:
                hung = f"launchtune {' '.join(args)}: still running after {timeout} s"
                raise AssertionError(hung) from None
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old_alarm)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        logger.handlers[:] = saved_handlers
        logger.setLevel(saved_level)
    return subprocess.CompletedProcess(["launchtune", *args], code, out.getvalue(), err.getvalue())


class _Hung(BaseException):
    """The timer's signal in :func:`run_cli_here`: no ``Exception``, so the command's handlers let it pass."""


def _hung(signum, frame) -> None:
    raise _Hung


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def one_line_error(result) -> str:
    """The CLI's answer to a user mistake: exit 2 and exactly one line on stderr."""
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-3000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]
