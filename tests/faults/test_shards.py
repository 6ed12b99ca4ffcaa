"""Silent data loss: a shard that is valid Parquet but not its batch's (rows missing, doubled, of another
batch, another schema) is never counted as finished, and ``merge`` never merges fewer samples than planned."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.batching import measure_order
from launchtune.pipeline.store.folder import SweepFolder
from launchtune.pipeline.store.schema import shard_schema
from launchtune.pipeline.store.shards import merge, pending_batches, shard_problem
from launchtune.pipeline.store.spec import parse_spec
from tests.pipeline.conftest import base_spec

PARAMS = ["a.blocks", "a.threads"]
KERNELS = ["a"]
SCHEMA = shard_schema(PARAMS, KERNELS)


def _table(ids: list[int], cls: str = "cpu", schema: pa.Schema = SCHEMA) -> pa.Table:
    rows = [{"sample_id": i, "gpu_class": cls, "status": "ok", "a.blocks": 1, "a.threads": 32} for i in ids]
    return pa.Table.from_pylist(rows, schema=schema)


def _write(path: Path, ids: list[int], schema: pa.Schema = SCHEMA) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(_table(ids, schema=schema), path)
    return path


def _planned_folder(tmp_path: Path, samples: int = 12, batch_size: int = 5) -> tuple[SweepFolder, list]:
    """A sweep folder with its description and the plan of class cpu (no cluster needed)."""
    spec = parse_spec(base_spec(samples=samples, batch_size=batch_size), "spec.yaml")
    folder = SweepFolder(tmp_path)
    folder.write_meta({"spec": spec.to_dict(), "planning_key": spec.planning_key()})
    configs = [("random", {"a.blocks": 1, "a.threads": 32}) for _ in range(samples)]
    folder.write_plan(
        "cpu", {"params": PARAMS, "values": {}, "default": {}, "kernels": KERNELS, "configs": configs}
    )
    return folder, measure_order(configs, batch_size)


def test_a_shard_is_finished_only_with_exactly_its_planned_ids_and_schema(tmp_path):
    path = tmp_path / "shard.parquet"
    assert shard_problem(_write(path, [0, 1, 2, 3, 4]), range(5), SCHEMA) is None
    assert "2 of its 5 planned samples missing (3, 4)" in shard_problem(
        _write(path, [0, 1, 2]), range(5), SCHEMA
    )
    assert "samples 1 twice" in shard_problem(_write(path, [0, 1, 1, 2, 3, 4]), range(5), SCHEMA)
    assert "samples 9 not of its batch" in shard_problem(_write(path, [0, 1, 2, 3, 4, 9]), range(5), SCHEMA)
    other = shard_schema(["x.blocks"], ["x"])
    _write(path, [0, 1, 2, 3, 4], schema=other)
    assert shard_problem(path, range(5), SCHEMA) == "its schema is not the plan's"
    path.write_bytes(b"PAR1 not parquet")
    assert shard_problem(path, range(5), SCHEMA).startswith("unreadable")


def test_a_short_shard_is_set_aside_with_one_line_and_its_batch_measured_again(tmp_path):
    folder, order = _planned_folder(tmp_path)
    (b0, rows0), (b1, rows1), (b2, _) = order
    _write(folder.shard_path("cpu", b0), [r[0] for r in rows0])  # whole
    short = _write(folder.shard_path("cpu", b1), [r[0] for r in rows1][:2])  # 2 of 5
    lines = []
    todo, done = pending_batches(tmp_path, "cpu", order, SCHEMA, lines.append)
    assert done == 1 and [b for b, _ in todo] == [b1, b2]
    assert len(lines) == 1 and str(short) in lines[0] and "3 of its 5 planned samples missing" in lines[0]
    kept = short.with_name(short.name + ".incomplete-1")
    assert not short.exists() and pq.read_table(kept).num_rows == 2  # renamed, not deleted
    # set aside twice: the first evidence is not overwritten
    _write(short, [r[0] for r in rows1][:1])
    pending_batches(tmp_path, "cpu", order, SCHEMA, lines.append)
    assert kept.exists() and short.with_name(short.name + ".incomplete-2").exists()
    assert folder.shards() == [folder.shard_path("cpu", b0)]  # set-aside files are never merged


def test_a_shard_of_another_schema_is_set_aside(tmp_path):
    folder, order = _planned_folder(tmp_path)
    (b0, rows0), *_ = order
    _write(folder.shard_path("cpu", b0), [r[0] for r in rows0], schema=shard_schema(["x.blocks"], ["x"]))
    todo, done = pending_batches(tmp_path, "cpu", order, SCHEMA)
    assert done == 0 and len(todo) == len(order)


def test_merge_names_a_first_shard_of_another_schema_not_the_good_ones_after_it(tmp_path):
    folder, order = _planned_folder(tmp_path)
    (b0, rows0), (b1, rows1), (b2, rows2) = order
    _write(folder.shard_path("cpu", b0), [r[0] for r in rows0], schema=shard_schema(["x.blocks"], ["x"]))
    _write(folder.shard_path("cpu", b1), [r[0] for r in rows1])
    _write(folder.shard_path("cpu", b2), [r[0] for r in rows2])
    with pytest.raises(UserError, match=f"shard-{b0}.parquet: its schema is not the plan's") as err:
        merge(tmp_path)
    assert "\n" not in str(err.value) and not folder.merged_dir.exists()


def test_merge_names_missing_samples_and_their_files(tmp_path):
    folder, order = _planned_folder(tmp_path)
    (b0, rows0), (b1, rows1), (b2, rows2) = order
    _write(folder.shard_path("cpu", b0), [r[0] for r in rows0])
    _write(folder.shard_path("cpu", b1), [r[0] for r in rows1][:2])  # 5, 6 kept; 7, 8, 9 lost
    with pytest.raises(UserError) as err:
        merge(tmp_path)
    msg = str(err.value)
    assert "class cpu: 5 of 12 planned samples missing (7, 8, 9, 10, 11;" in msg
    assert f"shard-{b1}.parquet" in msg and f"shard-{b2}.parquet" in msg and "\n" not in msg
    assert not folder.merged_dir.exists()  # nothing half-merged
    lines = []
    merged = merge(tmp_path, allow_missing=True, log=lines.append)  # a time-limited sweep
    assert merged.num_rows == 7 and len(lines) == 1 and "5 of 12 planned samples missing" in lines[0]


def test_merge_names_both_files_of_a_doubled_sample_and_refuses_unplanned_ones(tmp_path):
    folder, order = _planned_folder(tmp_path)
    (b0, rows0), (b1, rows1), (b2, rows2) = order
    _write(folder.shard_path("cpu", b0), [r[0] for r in rows0])
    _write(folder.shard_path("cpu", b1), [r[0] for r in rows1] + [0])
    _write(folder.shard_path("cpu", b2), [r[0] for r in rows2])
    with pytest.raises(
        UserError, match=rf"sample 0 of class cpu appears in two shards \(shard-{b0}.parquet, "
    ):
        merge(tmp_path)
    _write(folder.shard_path("cpu", b1), [r[0] for r in rows1] + [40])
    with pytest.raises(UserError, match="class cpu has samples 40 that its plan does not have"):
        merge(tmp_path)
    _write(folder.shard_path("cpu", b1), [r[0] for r in rows1])
    assert merge(tmp_path).num_rows == 12
