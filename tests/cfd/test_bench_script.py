"""The GPU benchmark script still runs (on numpy, tiny grid, no scans): guards it between GPU sessions."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO


def test_cfd_step_benchmark_smoke(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.cfd_step",
            "--backend",
            "numpy",
            "--size",
            "52x16",
            "--repeats",
            "2",
            "--no-scan",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    result = json.loads((tmp_path / "cfd_step.json").read_text())
    assert set(result["kernels"]) == {
        "xi_limiter",
        "eta_limiter",
        "xi_flux",
        "eta_flux",
        "source",
        "rhs",
        "update",
    }
    assert result["step_min_bytes"] == sum(k["min_bytes_per_step"] for k in result["kernels"].values())
    assert "xi_flux" in r.stdout
