"""A live search on a GPU (the lead's lent machine): the example convolution kernel searched by ours and by
Kernel Tuner's own ``tune_kernel`` (``--strategy kt:<name>``) through the real CLI, the budget spent, the
pick re-measured against the default; Kernel Tuner's rerun answered from its cache."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import REPO
from tests.pipeline.conftest import run_cli

pytestmark = pytest.mark.gpu

CONVOLUTION = str(REPO / "kernels" / "examples" / "convolution.yaml")


def _sweep(tmp_path: Path) -> Path:
    sweep = {
        "name": "conv_search",
        "workload": "kernel",
        "case": "convolution",
        "size": "1024x1024",
        "backend": "cupy",
        "options": {"spec": CONVOLUTION, "compile_workers": 2},
        "repeats": 3,
        "validate": {"pool": 100, "top_k": 2, "repeats": 3, "rounds": 5},
        "train": {"hidden_layers": [8], "max_epochs": 20},
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    return path


@pytest.mark.parametrize("strategy", ["evolve", "kt:random_sample"])
def test_a_live_search_spends_its_budget_and_re_measures_its_pick(tmp_path, strategy):
    out = tmp_path / "out"
    args = ("sweep", str(_sweep(tmp_path)), "--strategy", strategy, "--budget", "12", "--out", str(out))
    args += ("--remeasure",)
    done = run_cli(*args, cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = pq.read_table(out / "merged", partitioning="hive").to_pandas()
    assert len(rows) == 12 and sorted(rows["sample_id"]) == list(range(12))
    assert set(rows["strategy"]) == {strategy}
    validation = json.loads((out / "validation.json").read_text())
    (entry,) = validation.values()
    assert entry["model"] == f"search:{strategy}" and entry["search"]["measured"] == 12
    assert entry["candidates"] and entry["comparison"] is not None  # pick against the default, interleaved
    again = run_cli(*args, cwd=tmp_path, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    said = again.stdout + again.stderr
    assert "0 measured now" in said or "12 from its cache" in said, said[-2000:]
