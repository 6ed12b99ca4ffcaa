"""Errors a retry cannot fix (permission, read-only file system, disk full) while writing a shard: the batch
reports them instead of raising, so Dask does not retry it, and the sweep stops at the first one."""

from __future__ import annotations

import errno

import pyarrow.parquet as pq
import pytest

from launchtune.pipeline.store.spec import parse_spec
from launchtune.pipeline.sweep.worker import measure_batch
from tests.pipeline.conftest import base_spec

PLAN = {"params": ["a.blocks", "a.threads", "b.blocks", "b.threads"], "kernels": ["a", "b"]}
ROWS = [(0, "random", {"a.blocks": 2, "a.threads": 64, "b.blocks": 2, "b.threads": 32})]


def _measure(tmp_path):
    spec = parse_spec(base_spec(), "test").to_dict()
    path = tmp_path / "shards" / "gpu_class=cpu" / "shard-00000.parquet"
    return path, measure_batch(spec, PLAN, "cpu", "00000", ROWS, str(path), str(tmp_path))


def _failing(code):
    def write_table(table, where, *args, **kwargs):
        raise OSError(code, "injected", str(where))

    return write_table


@pytest.mark.parametrize(
    "code, words",
    [
        (errno.EROFS, "Read-only file system"),
        (errno.ENOSPC, "No space left on device"),
        (errno.EACCES, "Permission denied"),
        (errno.EPERM, "Operation not permitted"),
    ],
)
def test_a_permanent_write_error_is_reported_once_not_raised(tmp_path, monkeypatch, code, words):
    monkeypatch.setattr(pq, "write_table", _failing(code))
    path, result = _measure(tmp_path)
    assert result["fatal"] == f"cannot write {path}: {words}"
    assert not path.exists() and not list(path.parent.glob(".*.tmp"))  # no half shard, no stray tmp


def test_a_transient_write_error_is_raised_for_dask_to_retry(tmp_path, monkeypatch):
    monkeypatch.setattr(pq, "write_table", _failing(errno.EIO))
    with pytest.raises(OSError, match="injected"):
        _measure(tmp_path)


def test_rows_that_do_not_fit_the_plans_schema_are_reported_once_not_raised(tmp_path):
    """A row the shard's schema cannot hold (here a sample id past int64) fails alike on every retry."""
    spec = parse_spec(base_spec(), "test").to_dict()
    path = tmp_path / "shards" / "gpu_class=cpu" / "shard-00000.parquet"
    rows = [(2**70, *ROWS[0][1:])]
    result = measure_batch(spec, PLAN, "cpu", "00000", rows, str(path), str(tmp_path))
    assert result["fatal"].startswith(f"cannot write {path}: not the plan's schema (")
    assert "\n" not in result["fatal"] and not path.exists()
