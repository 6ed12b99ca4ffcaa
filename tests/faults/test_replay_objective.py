"""The replay of a GFLOP/s-ranked Kernel Tuner cache (issue 54): a row's ``total_ms`` is the time the cache
recorded beside the objective, never the objective's cost (1/GFLOP/s); the objective stays in its own
columns (``objective``, ``metric.GFLOP/s``), and the report's time fields hold times."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import yaml

from tests.faults.test_fourth_round import _gflops_cache
from tests.pipeline.conftest import run_cli_here


def _replay_sweep(tmp_path, keep_time: bool):
    cache = _gflops_cache(tmp_path / "gf.json")
    if not keep_time:
        doc = json.loads(cache.read_text())
        for entry in doc["cache"].values():
            entry.pop("time")
        cache.write_text(json.dumps(doc))
    spec = {
        "name": "rp", "workload": "replay", "case": "demo", "size": "8x4", "backend": "numpy", "samples": 8,
        "samplers": ["random"], "batch_size": 4, "repeats": 1, "options": {"dataset": str(cache)},
        "validate": {"pool": 8, "top_k": 2, "repeats": 2},
    }  # fmt: skip
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    args = ["sweep", "spec.yaml", "--out", str(out), "--no-train-models"]
    result = run_cli_here(*args, cwd=tmp_path, allow_fake=False)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    return out, pq.read_table(out / "merged", partitioning="hive").to_pandas()


def test_a_replayed_gflops_cache_records_its_times_as_times(tmp_path):
    out, rows = _replay_sweep(tmp_path, keep_time=True)
    for _, row in rows.iterrows():
        a, b = int(row["a"]), int(row["b"])
        assert row["total_ms"] == pytest.approx(1.0 / (a * b))  # the cache's time, not 1/GFLOP/s
        assert row["objective"] == pytest.approx(1.0 / (10.0 * a * b))
        assert row["metric.GFLOP/s"] == pytest.approx(10.0 * a * b)
    report = json.loads((out / "report.json").read_text())["classes"]["cpu"]
    assert report["objective"] == {"maximize": "GFLOP/s"}
    assert report["best_sampled_time_ms"] == pytest.approx(0.125)  # a=4, b=2: 80 GFLOP/s in 0.125 ms


def test_a_replayed_gflops_cache_without_times_ranks_by_its_objective(tmp_path):
    """No time recorded: the rows keep the objective's cost where the time goes (the re-measure needs a
    number; ``objective`` says what it is), and rank by the objective as before."""
    _, rows = _replay_sweep(tmp_path, keep_time=False)
    assert (rows["status"] == "ok").all() and (rows["total_ms"] == rows["objective"]).all()
    assert rows.sort_values("objective").iloc[0][["a", "b"]].tolist() == [4, 2]
