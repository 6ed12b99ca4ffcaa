"""Helpers for pipeline tests: a spec writer and a runner of the real CLI in a subprocess."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import call_main

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
    """``launchtune ARGS`` in this process (:func:`launchtune.pipeline.cli.main` through
    :func:`tests.conftest.call_main`), answered as :func:`run_cli` answers: exit code, stdout and stderr.

    For a test of a command's message and exit code (a refusal before any cluster starts), not of the process
    (signals, an interpreter's start, a cluster's workers). ``env`` and ``cwd`` hold for the call only, with
    ``$LAUNCHTUNE_RESULTS`` under ``cwd`` as :func:`run_cli` sets it; the library's log handler that the
    command installs is taken off again; a command still running after ``timeout`` seconds fails the test.
    """
    from launchtune.pipeline import cli

    if allow_fake and args[:1] == ("sweep",) and "--help" not in args:
        args = (*args, "--allow-workload", FAKE)
    extra = {**(env or {})}
    if cwd is not None:
        results = os.environ.get("LAUNCHTUNE_RESULTS", str(Path(cwd) / "results"))
        extra.setdefault("LAUNCHTUNE_RESULTS", results)
    logger = logging.getLogger("launchtune")
    saved_handlers, saved_level = list(logger.handlers), logger.level
    try:
        done = call_main(cli.main, args, cwd=cwd, env=extra, timeout=timeout)
    finally:
        logger.handlers[:] = saved_handlers
        logger.setLevel(saved_level)
    return subprocess.CompletedProcess(["launchtune", *args], done.returncode, done.stdout, done.stderr)


def one_line_error(result) -> str:
    """The CLI's answer to a user mistake: exit 2 and exactly one line on stderr."""
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-3000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]
