"""End-to-end: the real CLI in a subprocess; its refusals of bad flags in process (``cli.main``)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from launchtune.kernels.cfd.cli import main
from tests.conftest import REPO, call_main


def cli(*args, cwd=REPO):
    return subprocess.run(
        [sys.executable, "-m", "launchtune.kernels.cfd", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_run_writes_solution_residuals_summary_and_figure(tmp_path):
    out = tmp_path / "inlet"
    r = cli(
        "run", "--case", "inlet", "--size", "52x16", "--steps", "40", "--backend", "numpy", "--out", str(out)
    )
    assert r.returncode == 0, r.stderr
    sol = np.load(out / "solution.npz")
    for key in ("x", "y", "rho", "u", "v", "p"):
        assert sol[key].shape == (52, 16)
    assert sol["x"][0, 0] < sol["x"][-1, 0]  # i runs along the flow
    above_wall = sol["y"][:, 0] - np.minimum(sol["x"][:, 0] * np.tan(np.radians(30)), 0.2)
    assert ((above_wall > 0) & (above_wall < 0.03)).all()  # j = 0 is the row on the ramp wall
    assert (sol["p"] > 0).all() and (sol["rho"] > 0).all()
    rows = (out / "residuals.csv").read_text().splitlines()
    assert rows[0].startswith("step,l2_rho") and len(rows) > 10
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 40 and summary["size"] == [52, 16] and "autotune" not in summary
    assert summary["device"]["gpu_class"] == "cpu"
    assert (out / "mach.png").read_bytes()[:4] == b"\x89PNG"
    # a progress line each tenth of the run (and at least every 10 s), each but the last with what is left
    progress = [line for line in r.stderr.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in progress] == [f"{k}/40" for k in range(4, 41, 4)]
    assert all(", about " in line and line.endswith(" left") for line in progress[:-1])
    assert "left" not in progress[-1]


def test_mms_order_of_accuracy(tmp_path):
    r = cli("mms", "--sizes", "16,32,64", "--backend", "numpy", "--drop", "8", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    result = json.loads((tmp_path / "mms.json").read_text())
    assert result["sizes"] == [16, 32, 64]
    assert len(result["l2_rho"]) == 3 and len(result["order_rho"]) == 2
    assert result["l2_rho"][0] > result["l2_rho"][1] > result["l2_rho"][2]
    assert result["order_rho"][-1] >= 1.8
    assert "order" in r.stdout


@pytest.mark.parametrize(
    "args, field",
    [
        (["run", "--size", "208by64"], "--size"),
        (["run", "--size", "2x64"], "--size"),
        (["run", "--case", "nozzle"], "--case"),
        (["run", "--backend", "opencl"], "--backend"),
        (["run", "--steps", "0"], "--steps"),
        (["run", "--residual-every", "0"], "--residual-every"),  # exit 0 before
        (["run", "--residual-every", "-3"], "--residual-every"),
        (["run", "--autotune", "always"], "--autotune"),
        (["run", "--limiter", "superbee2"], "--limiter"),
        (["mms", "--sizes", "32,a"], "--sizes"),
        (["mms", "--sizes", "64,32"], "--sizes"),
    ],
)
def test_user_mistakes_get_one_line_and_exit_2(tmp_path, args, field):
    out = tmp_path / "never"
    extra = ["--out", str(out)] if args[0] == "run" else []
    r = call_main(main, [*args, *extra])
    assert r.returncode == 2
    lines = [x for x in r.stderr.strip().splitlines() if x]
    assert field in lines[-1]
    assert len(lines) == 1
    assert not out.exists()


def test_cupy_backend_without_gpu_is_a_clear_error(tmp_path):
    from launchtune.kernels.backend import gpu_count

    if gpu_count():
        pytest.skip("a GPU is visible here")
    r = call_main(main, ["run", "--backend", "cupy", "--out", str(tmp_path / "x")])
    assert r.returncode == 2 and "cupy" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_run_with_runtime_autotuning_records_it(tmp_path):
    out = tmp_path / "tuned"
    r = cli(
        "run",
        "--size",
        "52x16",
        "--steps",
        "20",
        "--backend",
        "numpy",
        "--autotune",
        "scan",
        "--no-plot",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["autotune"]["kernels"]) == {
        "xi_limiter",
        "eta_limiter",
        "xi_flux",
        "eta_flux",
        "source",
        "rhs",
        "update",
    }
    assert (out / "launches.csv").read_text().count("\n") > 7 * 4 * 20 * 0.9


def test_mms_out_a_file_fails_before_computing(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    # sizes that would take minutes: the error must come first, in well under that
    r = subprocess.run(
        [sys.executable, "-m", "launchtune.kernels.cfd", "mms", "--sizes", "256,512", "--backend", "numpy"]
        + ["--out", str(afile)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"error: --out {afile}: exists and is not a directory"
    ]
    assert afile.read_text() == "x"


def test_a_scan_too_short_for_a_table_says_why(tmp_path):
    out = tmp_path / "short"
    r = cli(
        "run",
        "--size",
        "52x16",
        "--steps",
        "4",
        "--backend",
        "numpy",
        "--autotune",
        "scan",
        "--no-plot",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    assert not (out / "tuning_table.json").exists()
    assert "no tuning_table.json: no kernel finished its first scan in 4 steps" in r.stderr
