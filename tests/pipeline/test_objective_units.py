"""A maximised objective in its own unit end to end, on the CPU: a live search on the replay workload
standing in for a kernel whose objective is ``maximize: GFLOP/s`` (a Kernel Tuner cache of GFLOP/s) logs its
best, its re-measured pick and default in GFLOP/s (the time beside them), the report's pick and table read
GFLOP/s, and the Python result says the same; no cost (seconds per GFLOP) is printed as milliseconds. And a
CPU sweep's ``Result.best`` warns, as its report says, that launch parameters do nothing there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import launchtune
from tests.pipeline.conftest import run_cli
from tests.strategies.test_objective_caches import BX, TILE, best, gflops, launch_ms, write


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("gflops")
    cache = write(tmp / "A100.json.gz", "GFLOP/s", gflops)
    spec = {
        "name": "gflops",
        "workload": "replay",
        "case": "toy",
        "size": "8x4",
        "backend": "numpy",
        "gpu_classes": ["cpu"],
        "repeats": 3,
        "seed": 0,
        "options": {"dataset": str(cache), "time_scale": 0.0},
        "validate": {"pool": 30, "top_k": 2, "repeats": 2},
        "train": {"hidden_layers": [8], "max_epochs": 20},
    }
    (tmp / "spec.yaml").write_text(yaml.safe_dump(spec))
    out = tmp / "out"
    budget = str(len(BX) * len(TILE))  # the whole space: the pick is the known maximum, whatever the seed
    done = run_cli(
        "sweep", "spec.yaml", "--strategy", "evolve", "--budget", budget, "--out", str(out),
        "--train-models", "--remeasure", cwd=tmp,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done.stdout


def _top() -> tuple[str, str]:
    """The best configuration's GFLOP/s as shown, and its recorded launch time (not what the rows keep: the
    stand-in has no time of its own, so its rows' time is the replayed cost)."""
    bx, tile = best(gflops)
    return f"{gflops(bx, tile):.4g} GFLOP/s", f"{launch_ms(bx, tile):.4g}"


def test_the_log_lines_say_gflops(searched):
    _, log = searched
    top, _ = _top()
    (found,) = [line for line in log.splitlines() if line.startswith("search cpu: 30 of 30 measurements")]
    assert found.split("best ", 1)[1].startswith(f"{top};"), found
    (again,) = [line for line in log.splitlines() if line.startswith("re-measured cpu's search pick:")]
    assert f"best (a row the sweep recorded) {top}, " in again
    default = f"{gflops(BX[0], TILE[0]):.4g} GFLOP/s"
    assert f", default {default}, " in again
    assert not re.search(r"\d ms[,;)]", found)  # nothing of the objective labelled ms


def test_the_report_and_its_table_say_gflops(searched):
    out, _ = searched
    top, _ = _top()
    text = (out / "report.md").read_text()
    pick = text.index("## The pick")
    assert pick < text.index("## What was measured") < text.index("## Models")  # the pick leads
    assert f"**cpu** (maximize GFLOP/s): the pick by `evolve`, re-measured, {top} (" in text
    assert "| best recorded in the sweep (GFLOP/s; time in ms) |" in text
    assert f"| **GFLOP/s** | {gflops(BX[0], TILE[0]):.4g} re-measured | {top.split()[0]} recorded |" in text


def test_the_python_result_says_gflops_and_warns_it_was_a_cpu(searched):
    out, _ = searched
    top, _ = _top()
    result = launchtune.load(out)
    assert result.best_value == top and f"({top})" in repr(result)
    with pytest.warns(UserWarning, match="numpy backend .* launch parameters change nothing"):
        picked = result.best
    bx, tile = best(gflops)
    assert picked == {"block_size_x": bx, "tile": tile}
