"""The streamed merge (issue 18) writes what the in-memory one wrote, and the plan stored as Parquet reads
back as it was planned."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.batching import measure_order
from launchtune.pipeline.store.folder import SweepFolder
from launchtune.pipeline.store.schema import shard_schema
from launchtune.pipeline.store.shards import merge
from launchtune.pipeline.store.spec import parse_spec
from launchtune.pipeline.store import shards as shards_module
from tests.pipeline.conftest import base_spec

PARAMS = ["a.blocks", "a.threads"]
SCHEMA = shard_schema(PARAMS, ["a"])


def _write(path, ids, cls="cpu"):
    rows = [
        {"sample_id": i, "gpu_class": cls, "status": "ok", "a.blocks": i, "a.threads": 32, "ms.a": i / 3}
        for i in ids
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)


def _configs(n):
    return [
        ("per_kernel_exhaustive" if i < 3 else "random", {"a.blocks": i, "a.threads": 32}) for i in range(n)
    ]


def _planned(tmp_path, samples, batch_size):
    spec = parse_spec(base_spec(samples=samples, batch_size=batch_size), "spec.yaml")
    folder = SweepFolder(tmp_path)
    folder.write_meta({"spec": spec.to_dict(), "planning_key": spec.planning_key()})
    configs = _configs(samples)
    plan = {"params": PARAMS, "values": {}, "default": {}, "kernels": ["a"], "configs": configs}
    folder.write_plan("cpu", plan)
    return folder, measure_order(configs, batch_size)


def _in_memory(folder):
    """What the merge wrote before issue 18: every shard concatenated, sorted, per class."""
    table = pa.concat_tables([pq.read_table(p) for p in folder.shards()])
    return table.sort_by([("gpu_class", "ascending"), ("sample_id", "ascending")])


def test_streamed_merge_writes_the_rows_of_the_in_memory_merge_in_row_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(shards_module, "ROW_GROUP_ROWS", 40)
    monkeypatch.setattr(shards_module, "READ_CHUNK", 3)
    folder, order = _planned(tmp_path, samples=230, batch_size=17)
    for batch, rows in order:
        _write(folder.shard_path("cpu", batch), [r[0] for r in rows])
    h100 = {"params": PARAMS, "values": {}, "default": {}, "kernels": ["a"], "configs": _configs(3)}
    folder.write_plan("h100", h100)
    _write(folder.shard_path("h100", "00000"), [2, 0, 1], cls="h100")  # unsorted inside: sorted in memory
    expected = _in_memory(folder)
    merged = merge(tmp_path)
    assert merged.num_rows == 233 and merged.rows_per_class == {"cpu": 230, "h100": 3}
    back = pq.read_table(merged.path, partitioning="hive")
    back = back.set_column(
        back.schema.get_field_index("gpu_class"), "gpu_class", back.column("gpu_class").cast(pa.string())
    )
    assert back.select(expected.column_names).equals(expected)
    part = pq.ParquetFile(merged.path / "gpu_class=cpu" / "part-0.parquet")
    assert part.metadata.num_row_groups > 3  # streamed, not one table
    assert "gpu_class" not in part.schema_arrow.names  # the class lives in the folder name, as before


def test_shards_whose_ids_interleave_are_sorted_in_memory(tmp_path):
    _planned(tmp_path, samples=6, batch_size=3)
    _write(tmp_path / "shards/gpu_class=cpu/shard-00000.parquet", [0, 2, 4])
    _write(tmp_path / "shards/gpu_class=cpu/shard-00001.parquet", [1, 3, 5])
    merged = merge(tmp_path)
    ids = pq.read_table(merged.path / "gpu_class=cpu" / "part-0.parquet").column("sample_id").to_pylist()
    assert ids == [0, 1, 2, 3, 4, 5]


def test_a_failed_check_writes_nothing_and_names_the_missing_batch(tmp_path):
    folder, order = _planned(tmp_path, samples=100, batch_size=20)
    lost = order[-1][0]  # a tail part
    for batch, rows in order:
        if batch != lost:
            _write(folder.shard_path("cpu", batch), [r[0] for r in rows])
    with pytest.raises(
        UserError, match=rf"5 of 100 planned samples missing \(95, 96.*in shard-{lost}.parquet"
    ):
        merge(tmp_path)
    assert not folder.merged_dir.exists() and not list(tmp_path.glob(".merged-*"))


def test_the_plan_is_stored_as_parquet_and_reads_back_as_planned(tmp_path):
    folder = SweepFolder(tmp_path)
    configs = _configs(50)
    plan = {"params": PARAMS, "values": {"a.blocks": [1]}, "default": {"a.blocks": 1, "a.threads": 32}}
    folder.write_plan("cpu", {**plan, "kernels": ["a"], "device": {"name": "x"}, "configs": configs})
    facts = json.loads(folder.plan_path("cpu").read_text())
    assert "configs" not in facts and facts["n_configs"] == 50 and facts["device"] == {"name": "x"}
    back = folder.read_plan("cpu")
    assert [tuple(c) for c in back["configs"]] == configs
    assert folder.read_plan_samplers("cpu") == [s for s, _ in configs]
    # a plan written before (configs in the JSON) and a slimmed one read as they are
    folder.plan_path("h100").write_text(json.dumps({**plan, "configs": [["random", {"a.blocks": 1}]]}))
    assert folder.read_plan("h100")["configs"] == [["random", {"a.blocks": 1}]]
    assert folder.read_plan_samplers("h100") == ["random"]
    folder.write_plan("v100", plan)
    slim = folder.read_plan("v100")
    assert slim.pop("checksums") and slim == plan and folder.read_plan_samplers("v100") is None
    (tmp_path / "plan" / "cpu.configs.parquet").write_bytes(b"not parquet")
    with pytest.raises(UserError, match=r"cpu.json: edited since it was planned \(its configurations file"):
        folder.read_plan("cpu")
    facts.pop("checksums")  # a plan written before checksums: its file is read, and refused as unreadable
    folder.plan_path("cpu").write_text(json.dumps(facts))
    with pytest.raises(UserError, match=r"cpu.configs.parquet: unreadable plan"):
        folder.read_plan("cpu")
