"""A command that needs a GPU and finds none says so in one line and exits 2, before it computes or writes
anything, unless the user asked for the CPU (``--backend numpy``): the CFD solver's runtime tuner
(``--autotune scan|seeded``, also with ``--space fused``) and the tridiagonal solver's ``--stage2 gpu``.
No GPU is made to be missing (``gpu_count`` answers 0), so the test means the same on a GPU machine."""

from __future__ import annotations

import pytest

from launchtune.kernels.cfd import cli as cfd_cli
from launchtune.kernels.tridiag import __main__ as tridiag_cli
from tests.conftest import REPO, call_main

TABLE = str(REPO / "data/cfd/h100/sweep_paper/tuning_table.json")


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(cfd_cli, "gpu_count", lambda: 0)
    monkeypatch.setattr(tridiag_cli, "gpu_count", lambda: 0)


@pytest.mark.parametrize(
    "args",
    [
        ["--autotune", "scan"],
        ["--autotune", "seeded", "--tuning-table", TABLE],
        ["--autotune", "scan", "--space", "fused"],
    ],
    ids=["scan", "seeded", "fused"],
)
def test_the_cfd_runtime_tuner_without_a_gpu_is_one_line(no_gpu, tmp_path, args):
    out = tmp_path / "run"
    done = call_main(
        cfd_cli.main, ["run", "--size", "3328x1024", "--steps", "5000", *args, "--out", str(out)]
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"error: --autotune {args[1]} tunes GPU launches and no GPU is visible here; give --backend numpy to "
        "watch the tuner's mechanics on the CPU (the launch parameters change nothing there)\n"
    )
    assert not out.exists()


def test_the_cfd_runtime_tuner_on_the_cpu_when_asked(no_gpu, tmp_path):
    out = tmp_path / "run"
    args = ["run", "--size", "16x8", "--steps", "2", "--autotune", "scan", "--backend", "numpy", "--no-plot"]
    done = call_main(cfd_cli.main, [*args, "--out", str(out)])
    assert done.returncode == 0, done.stderr
    assert (out / "summary.json").is_file()


def test_the_tridiagonal_gpu_stage_without_a_gpu_is_one_line(no_gpu):
    done = call_main(tridiag_cli.main, ["solve", "--size", "1e7", "--stage2", "gpu", "--copies", "spike"])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "error: --stage2 gpu solves the interface system on the GPU and no GPU is visible here; give "
        "--backend numpy to run the same steps on the CPU\n"
    )
    done = call_main(tridiag_cli.main, ["solve", "--size", "1000", "--stage2", "gpu", "--backend", "numpy"])
    assert done.returncode == 0, done.stderr
    assert "backend = numpy" in done.stdout and "stage2 = gpu" in done.stdout
