"""One rule for every folder the project writes under a sweep: it resolves inside the sweep folder. A
symlink where ``models/``, ``figures/``, ``merged/`` or a figure belongs that points out of it is refused
with one line, and nothing is written where it points (shards were refused so already)."""

from __future__ import annotations

from pathlib import Path

import pytest
from threadpoolctl import threadpool_limits

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.folder import SweepFolder
from tests.notebooks.conftest import write_sweep


def _outside(tmp_path: Path) -> Path:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    return outside


def test_train_refuses_a_models_symlink_out_of_the_sweep(tmp_path):
    from launchtune.pipeline.learn.train import train_sweep

    folder = write_sweep(tmp_path / "sweep", ("cpu",), train=False)
    outside = _outside(tmp_path)
    (folder / "models").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UserError) as info, threadpool_limits(limits=1):
        train_sweep(folder, log=lambda _: None)
    line = str(info.value)
    assert line.startswith(f"{folder / 'models'}") and f"resolves to {outside}" in line and "\n" not in line
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("link", ["figures", "figures/cpu-pred-vs-actual.png"])
def test_report_refuses_a_figures_symlink_out_of_the_sweep(tmp_path, link):
    from launchtune.pipeline.results.report import build_report

    folder = write_sweep(tmp_path / "sweep", ("cpu",))
    outside = _outside(tmp_path)
    (folder / "figures").mkdir()
    if link == "figures":
        (folder / "figures").rmdir()
        (folder / link).symlink_to(outside, target_is_directory=True)
    else:
        (folder / link).symlink_to(outside / "fig.png")
    with pytest.raises(UserError, match="outside .*remove the symlink"):
        build_report(folder)
    assert list(outside.iterdir()) == []


def test_a_symlink_inside_the_sweep_and_a_sweep_reached_through_a_symlink_are_fine(tmp_path):
    real = tmp_path / "real"
    (real / "store").mkdir(parents=True)
    (real / "models").symlink_to(real / "store", target_is_directory=True)
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    folder = SweepFolder(tmp_path / "alias")
    assert folder.models_dir == tmp_path / "alias" / "models"
    assert folder.model_path("cpu", "mlp") == tmp_path / "alias" / "models" / "cpu" / "mlp.skops"
    (real / "loop").symlink_to(real / "loop")
    with pytest.raises(UserError, match="not a usable path"):
        folder.figure_path("../loop")
