"""Unit tests of the pieces that need no cluster: batching, local worker plan, shards, models."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from launchtune.pipeline.cluster.local import plan_local_workers
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.learn.models import AdditiveKernelModel, load_model, save_model
from launchtune.pipeline.paths import assert_inside
from launchtune.pipeline.store.batching import batches
from launchtune.pipeline.store.folder import SweepFolder, as_plan, plan_facts
from launchtune.pipeline.store.schema import FIXED_FIELDS, kernel_params, shard_schema
from launchtune.pipeline.store.shards import is_finished, merge
from launchtune.pipeline.store.spec import parse_spec
from tests.pipeline.conftest import base_spec


def test_batches_cover_every_sample_once_with_stable_names():
    configs = [("random", {"a": i}) for i in range(23)]
    out = batches(configs, 10)
    assert [b for b, _ in out] == ["00000", "00001", "00002"]
    ids = [row[0] for _, rows in out for row in rows]
    assert ids == list(range(23))
    assert batches(configs, 10) == out


def test_local_workers_one_per_gpu_pinned_and_named():
    names = ["NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-16GB"]
    workers = plan_local_workers(names, None)
    assert [(w["name"], w["gpu_class"], w["env"]["CUDA_VISIBLE_DEVICES"]) for w in workers] == [
        ("h100-gpu0", "h100", "0"),
        ("v100-gpu1", "v100", "1"),
    ]
    # where the parent already restricts the GPUs, each worker gets the physical id of its GPU
    pinned = plan_local_workers(names, "3,5")
    assert [w["env"]["CUDA_VISIBLE_DEVICES"] for w in pinned] == ["3", "5"]
    cpu = plan_local_workers([], None)
    assert [(w["name"], w["gpu_class"]) for w in cpu] == [("cpu-0", "cpu")]


def test_worker_guard_refuses_paths_outside_the_sweep(tmp_path):
    assert_inside(tmp_path, tmp_path / "shards" / "x.parquet")
    with pytest.raises(PermissionError):
        assert_inside(tmp_path / "sweep", tmp_path / "sweep" / ".." / "evil.parquet")


def _shard(path, cls, ids):
    schema = shard_schema(["a.blocks"], ["a"])
    rows = [
        {"sample_id": i, "gpu_class": cls, "status": "ok", "a.blocks": 1, "ms.a": 1.0, "total_ms": 1.0}
        for i in ids
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def test_schema_is_fixed_fields_then_params_then_kernels():
    schema = shard_schema(["x.blocks", "x.threads"], ["x"])
    assert schema.names[: len(FIXED_FIELDS)] == [f.name for f in FIXED_FIELDS]
    assert schema.names[len(FIXED_FIELDS) :] == ["x.blocks", "x.threads", "ms.x"]
    assert kernel_params(["x.blocks", "x.threads", "streams"]) == {
        "x": ["x.blocks", "x.threads"],
        "streams": ["streams"],
    }


def _plan(folder_path, samples_per_class, batch_size=2):
    """The sweep.json and plans the merge checks shards against (configs as :func:`_shard` writes them)."""
    spec = parse_spec(base_spec(batch_size=batch_size), "spec.yaml")
    folder = SweepFolder(folder_path)
    folder.write_meta({"spec": spec.to_dict(), "planning_key": spec.planning_key()})
    for cls, n in samples_per_class.items():
        configs = [("random", {"a.blocks": 1})] * n
        folder.write_plan(
            cls, {"params": ["a.blocks"], "values": {}, "default": {}, "kernels": ["a"], "configs": configs}
        )


def test_merge_names_a_corrupt_shard(tmp_path):
    _plan(tmp_path, {"cpu": 4})
    _shard(tmp_path / "shards/gpu_class=cpu/shard-00000.parquet", "cpu", [0, 1])
    bad = tmp_path / "shards/gpu_class=cpu/shard-00001.parquet"
    bad.write_bytes(b"PAR1 this is not parquet")
    assert not is_finished(bad)
    with pytest.raises(UserError, match="shard-00001.parquet: corrupt shard"):
        merge(tmp_path)


def test_merge_refuses_duplicates_and_empty(tmp_path):
    with pytest.raises(UserError, match="no shards"):
        merge(tmp_path)
    _plan(tmp_path, {"cpu": 4})
    _shard(tmp_path / "shards/gpu_class=cpu/shard-00000.parquet", "cpu", [0, 1])
    _shard(tmp_path / "shards/gpu_class=cpu/shard-00001.parquet", "cpu", [1, 2])
    with pytest.raises(UserError, match="sample 1 of class cpu appears in two shards"):
        merge(tmp_path)


def test_merge_partitions_by_class(tmp_path):
    _plan(tmp_path, {"cpu": 2, "h100": 3}, batch_size=10)
    _shard(tmp_path / "shards/gpu_class=cpu/shard-00000.parquet", "cpu", [0, 1])
    _shard(tmp_path / "shards/gpu_class=h100/shard-00000.parquet", "h100", [0, 1, 2])
    merged = merge(tmp_path)
    assert merged.num_rows == 5
    assert sorted(p.parent.name for p in (tmp_path / "merged").glob("*/*.parquet")) == [
        "gpu_class=cpu",
        "gpu_class=h100",
    ]


def test_additive_model_is_exact_on_additive_data_and_finds_each_kernels_best():
    rng = np.random.default_rng(1)
    X = rng.choice([1, 2, 4, 8], size=(400, 4)).astype(float)
    ka = (X[:, 0] - 4) ** 2 + X[:, 1]
    kb = np.abs(X[:, 2] - 2) + 0.1 * X[:, 3]
    y = ka + kb + 0.5
    model = AdditiveKernelModel(groups={"a": [0, 1], "b": [2, 3]}).fit(X, y, kernel_times=np.c_[ka, kb])
    assert np.allclose(model.predict(X), y)
    best = model.best_per_kernel(["p", "q", "r", "s"], {n: [1, 2, 4, 8] for n in "pqrs"})
    assert best == {"p": 4, "q": 1, "r": 2, "s": 1}


def test_additive_model_without_groups_says_what_it_needs():
    X = np.ones((4, 2))
    with pytest.raises(ValueError, match="needs groups"):
        AdditiveKernelModel().fit(X, X.sum(1), kernel_times=X)


def test_a_workers_plan_is_recorded_without_its_pool_and_its_facts_in_one_order():
    answer = {
        "params": ["a"],
        "values": {"a": [1, 2]},
        "default": {"a": 1},
        "kernels": ["k"],
        "device": {"device_name": "x"},
        "pool": np.zeros((2, 1)),
        "inactive": [],
    }
    assert list(as_plan(answer)) == ["params", "values", "default", "kernels", "device", "inactive"]
    assert list(plan_facts(answer)) == ["params", "values", "default", "kernels", "inactive"]


def test_models_round_trip_through_skops(tmp_path):
    X = np.arange(40, dtype=float).reshape(20, 2)
    model = AdditiveKernelModel(groups={"a": [0], "b": [1]}).fit(X, X.sum(1), kernel_times=X)
    save_model(model, tmp_path / "m.skops")
    loaded = load_model(tmp_path / "m.skops")
    assert np.allclose(loaded.predict(X), model.predict(X))


class Payload:
    """Stands for anything an attacker might put in a model file."""

    def __init__(self):
        self.command = "rm -rf ~"


def test_a_model_file_with_an_untrusted_type_is_refused(tmp_path):
    import skops.io as sio

    sio.dump({"model": Payload()}, tmp_path / "evil.skops")
    with pytest.raises(UserError, match="untrusted types: tests.pipeline.test_units.Payload"):
        load_model(tmp_path / "evil.skops")


def test_a_batch_whose_shard_exists_is_reported_not_measured_again(tmp_path):
    """Dask re-runs a finished task after losing the worker that held its result: the shard must be kept."""
    from launchtune.pipeline.store.spec import parse_spec
    from launchtune.pipeline.sweep.worker import measure_batch
    from tests.pipeline.conftest import base_spec

    spec = parse_spec(base_spec(), "test").to_dict()
    plan = {"params": ["a.blocks", "a.threads", "b.blocks", "b.threads"], "kernels": ["a", "b"]}
    rows = [
        (0, "random", {"a.blocks": 2, "a.threads": 64, "b.blocks": 2, "b.threads": 32}),
        (1, "random", {"a.blocks": 8, "a.threads": 32, "b.blocks": 4, "b.threads": 64}),  # fails check
    ]
    path = tmp_path / "shards" / "gpu_class=cpu" / "shard-00000.parquet"
    first = measure_batch(spec, plan, "cpu", "00000", rows, str(path), str(tmp_path))
    written = path.stat().st_mtime_ns, pq.read_table(path).column("total_ms").to_pylist()
    again = measure_batch(spec, plan, "cpu", "00000", rows, str(path), str(tmp_path))
    counts = ("batch", "gpu_class", "rows", "ok", "invalid", "failed")
    expected = {"batch": "00000", "gpu_class": "cpu", "rows": 2, "ok": 1, "invalid": 1, "failed": 0}
    assert {k: first[k] for k in counts} == {k: again[k] for k in counts} == expected
    assert first["measured"] and not again["measured"]  # the second is not counted as busy time
    assert (path.stat().st_mtime_ns, pq.read_table(path).column("total_ms").to_pylist()) == written


def test_a_one_row_shard_is_written_plain_and_a_batch_compressed(tmp_path):
    """A search writes one shard per proposal: one row compresses to nothing, and zstd's per-column set-up,
    dictionary pages and statistics were most of the shard's host time (issue 53); a batch of rows keeps
    zstd, dictionaries and statistics. Both read back the same."""
    from launchtune.pipeline.store.spec import parse_spec
    from launchtune.pipeline.sweep.worker import measure_batch
    from tests.pipeline.conftest import base_spec

    spec = parse_spec(base_spec(), "test").to_dict()
    plan = {"params": ["a.blocks", "a.threads", "b.blocks", "b.threads"], "kernels": ["a", "b"]}
    one = {"a.blocks": 2, "a.threads": 64, "b.blocks": 2, "b.threads": 32}
    two = {"a.blocks": 4, "a.threads": 32, "b.blocks": 2, "b.threads": 32}
    codecs, dictionaries, statistics = {}, {}, {}
    batches = {"one": [(0, "search", one)], "batch": [(0, "random", one), (1, "random", two)]}
    for name, rows in batches.items():
        path = tmp_path / "shards" / "gpu_class=cpu" / f"shard-{name}.parquet"
        assert measure_batch(spec, plan, "cpu", name, rows, str(path), str(tmp_path))["ok"] == len(rows)
        meta = pq.ParquetFile(path).metadata
        columns = [meta.row_group(0).column(j) for j in range(meta.num_columns)]
        codecs[name] = {c.compression for c in columns}
        dictionaries[name] = any(c.has_dictionary_page for c in columns)
        statistics[name] = any(c.is_stats_set for c in columns)
        assert pq.read_table(path).column("a.blocks").to_pylist() == [r[2]["a.blocks"] for r in rows]
    assert codecs == {"one": {"UNCOMPRESSED"}, "batch": {"ZSTD"}}
    assert dictionaries == statistics == {"one": False, "batch": True}
