"""Faults injected into a real sweep through the CLI (fake workload, local CPU cluster)."""

from __future__ import annotations

import errno
import json
import shutil

import pyarrow.parquet as pq
import pytest
import yaml

from tests.pipeline.conftest import base_spec, one_line_error, run_cli, run_cli_here


def _ok(result):
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    return result


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """One finished sweep of 30 samples in batches of 10, which each test copies and then damages."""
    tmp = tmp_path_factory.mktemp("swept")
    spec = tmp / "spec.yaml"
    spec.write_text(yaml.safe_dump(base_spec(samples=30, batch_size=10)))
    _ok(run_cli("sweep", str(spec), "--out", str(tmp / "out"), cwd=tmp))
    return spec, tmp / "out"


def _copy(swept, tmp_path):
    """The shared sweep's spec and a copy of its folder (file times kept) in this test's own folder."""
    spec, done = swept
    out = tmp_path / "out"
    shutil.copytree(done, out, ignore=shutil.ignore_patterns(".dask"))
    return spec, out


def test_a_short_shard_is_set_aside_remeasured_and_the_report_counts_the_merged_rows(tmp_path, swept):
    spec, out = _copy(swept, tmp_path)
    shard = out / "shards/gpu_class=cpu/shard-00001.parquet"
    table = pq.read_table(shard)
    pq.write_table(table.slice(0, 2), shard)  # valid Parquet, 2 of its 10 rows: the fault of issue 14
    result = _ok(run_cli("sweep", str(spec), "--out", str(out), cwd=tmp_path))
    noted = [line for line in result.stdout.splitlines() if "set aside" in line]
    assert len(noted) == 1 and str(shard) in noted[0] and "8 of its 10 planned samples missing" in noted[0]
    assert pq.read_table(shard.with_name(shard.name + ".incomplete-1")).num_rows == 2  # kept as evidence
    merged = pq.read_table(out / "merged", partitioning="hive").to_pandas()
    assert sorted(merged["sample_id"]) == list(range(30))  # nothing lost, nothing doubled
    assert sorted(pq.read_table(shard)["sample_id"].to_pylist()) == sorted(table["sample_id"].to_pylist())
    assert "Measured 30 configurations (the merged data)." in (out / "report.md").read_text()
    assert json.loads((out / "report.json").read_text())["merged_rows"] == 30


def test_a_lost_shard_makes_merge_name_the_missing_samples_and_file(tmp_path, swept):
    _, out = _copy(swept, tmp_path)
    (out / "shards/gpu_class=cpu/shard-00002.parquet").unlink()
    line = one_line_error(run_cli_here("merge", str(out), cwd=tmp_path))
    assert "class cpu: 10 of 30 planned samples missing (20, 21," in line and "shard-00002.parquet" in line
    result = _ok(run_cli_here("merge", str(out), "--allow-missing", cwd=tmp_path))
    assert "merged 20 rows" in result.stdout


def test_a_read_only_shard_folder_stops_the_sweep_at_the_first_batch_with_one_line(tmp_path, write_spec):
    attempts = tmp_path / "attempts.log"
    spec = write_spec(
        samples=30, batch_size=5, options={"fail_writes": errno.EROFS, "attempts": str(attempts)}
    )
    out = tmp_path / "out"
    line = one_line_error(run_cli("sweep", str(spec), "--out", str(out), cwd=tmp_path))
    assert "cannot write " in line and "shard-" in line and "Read-only file system" in line
    assert "stopped at the first such batch" in line
    tried = attempts.read_text().splitlines()
    # one attempt per batch already in flight when the first failed (two per worker), never three retries
    assert 1 <= len(tried) <= 2 and len(set(tried)) == len(tried)
    assert not list((out / "shards").rglob("*.parquet"))
    assert not (out / "merged").exists()
