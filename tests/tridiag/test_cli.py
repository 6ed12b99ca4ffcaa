"""``python -m kernels.tridiag solve`` driven as a user would (numpy backend, so it runs anywhere)."""

from __future__ import annotations

import subprocess
import sys

from launchtune.kernels.tridiag.__main__ import main
from tests.conftest import REPO, call_main


def _run(*args):
    return subprocess.run(
        [sys.executable, "-m", "launchtune.kernels.tridiag", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_solve_prints_residual_and_stages():
    out = _run("solve", "--size", "12345", "--streams", "8", "--backend", "numpy", "--repeats", "2")
    assert out.returncode == 0, out.stderr
    assert "residual ||Ax-b||/||b|| = " in out.stdout and "(ok)" in out.stdout
    for stage in ("t1_h2d", "t1_comp", "t1_d2h", "t2_host", "t3_h2d", "t3_comp", "t3_d2h"):
        assert stage in out.stdout
    assert "end to end, 8 streams" in out.stdout


def test_solve_with_the_spike_pipeline():
    args = ("--size", "54321", "--streams", "4", "--stage2", "gpu", "--copies", "spike", "--ends", "25")
    out = _run("solve", *args, "--backend", "numpy", "--repeats", "1")
    assert out.returncode == 0, out.stderr
    assert "copies = spike  ends = 25%" in out.stdout and "(ok)" in out.stdout


def test_bad_input_is_one_line_exit_2():
    for args in (
        ["--size", "-3"],
        ["--size", "1000", "--streams", "12"],
        ["--size", "10", "--m", "2"],
        ["--size", "1000", "--copies", "spike"],  # needs --stage2 gpu
        ["--size", "1000", "--stage2", "gpu", "--copies", "ordered", "--ends", "50"],  # ends: chained only
    ):
        out = call_main(main, ["solve", *args, "--backend", "numpy"])  # in process: a message, an exit code
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
