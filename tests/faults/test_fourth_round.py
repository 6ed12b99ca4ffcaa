"""The fourth round's attacks (issue 54), replayed through the CLI and the Python API: each answered with one
line (exit code 2) or a named exception, nothing lost, nothing hung. The cases each fix owns live beside it;
this file keeps the attacker's commands together so a regression shows where the round found it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

import launchtune
from launchtune.pipeline.errors import UserError
from tests.pipeline.conftest import REPO, one_line_error, run_cli_here


def test_make_test_draws_the_same_examples_on_every_run():
    """CI that cannot fail at random: the profile ``make test`` loads is derandomised, with no example
    database that a previous run could have filled (``make fuzz`` loads the random one)."""
    if os.environ.get("LAUNCHTUNE_HYPOTHESIS_PROFILE", "ci") != "ci":
        assert not settings.default.derandomize  # make fuzz: fresh randomness
        return
    assert settings.default.derandomize and settings.default.database is None


# ----- a sweep folder is the project's own: nothing writes a file inside it that the sweep does not own

SWEEP = REPO / "data" / "cfd" / "cpu" / "sweep_paper"  # a small committed sweep with merged rows and a table


def _sweep(tmp_path: Path) -> Path:
    out = tmp_path / "SW"
    shutil.copytree(SWEEP, out)
    return out


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "command",
    [
        ["export", "--format", "kernel-tuner", "{SW}", "{SW}/sweep.json"],
        ["export", "--format", "kernel-tuner", "{SW}", "{SW}/tuning_table.json"],
        ["export", "--format", "kernel-tuner", "{SW}", "{SW}/merged/x.json"],
        ["export", "--format", "kernel-tuner", "{SW}", "{SW}/caches"],
        ["strategies", "--dataset", "{SW}", "--export", "{SW}/merged/gpu_class=cpu/part-0.parquet"],
        ["strategies", "--dataset", "{SW}", "--export", "{SW}/x.parquet"],
    ],
)
def test_no_command_writes_inside_a_sweep_folder(tmp_path, command):
    sw = _sweep(tmp_path)
    before = _snapshot(sw)
    line = one_line_error(run_cli_here(*[c.replace("{SW}", str(sw)) for c in command], cwd=tmp_path))
    assert "a folder launchtune made" in line and "outside it" in line, line
    assert _snapshot(sw) == before  # nothing replaced, nothing added


def test_the_api_writes_no_cache_inside_a_sweep_folder(tmp_path):
    sw = _sweep(tmp_path)
    before = _snapshot(sw)
    with pytest.raises(UserError, match="a folder launchtune made"):
        launchtune.load(sw).to_kernel_tuner_cache(sw / "sweep.json")
    assert _snapshot(sw) == before


def test_a_cache_beside_a_sweep_folder_is_written(tmp_path):
    """The refusal is for inside only: a sibling of the sweep folder is the user's."""
    sw = _sweep(tmp_path)
    result = run_cli_here(
        "export", "--format", "kernel-tuner", str(sw), str(tmp_path / "cpu.json"), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "cpu.json").is_file()
