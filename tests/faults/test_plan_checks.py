"""Wrong data refused: a shard is checked against the plan (its configurations and the sweep's seed, not
only its sample ids), and a ``sweep.json`` or plan edited since the sweep wrote it is refused naming what
differs."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.batching import measure_order
from launchtune.pipeline.store.checksums import EditedFile, shard_metadata
from launchtune.pipeline.store.folder import PLANNED_WITH, SweepFolder
from launchtune.pipeline.store.ownership import write_marker
from launchtune.pipeline.store.shards import Planned, merge, pending_batches
from launchtune.pipeline.store.spec import parse_spec
from launchtune.pipeline.sweep.run import plan_class, start_afresh_if_edited
from tests.faults.test_shards import KERNELS, PARAMS, SCHEMA
from tests.pipeline.conftest import base_spec, one_line_error, run_cli, run_cli_here

SEED = 7
CONFIG = {"a.blocks": 9, "a.threads": 32}


def _folder(tmp_path: Path, samples: int = 12, batch_size: int = 5) -> tuple[SweepFolder, list]:
    """A sweep folder with its description and a plan whose configurations differ per sample."""
    spec = parse_spec(base_spec(samples=samples, batch_size=batch_size, seed=SEED), "spec.yaml")
    folder = SweepFolder(tmp_path)
    write_marker(tmp_path, "sweep")
    folder.write_meta({"spec": spec.to_dict(), "planning_key": spec.planning_key()})
    configs = [("random", {"a.blocks": i + 1, "a.threads": 32 * (i % 3 + 1)}) for i in range(samples)]
    plan = {"params": PARAMS, "values": {}, "default": {}, "kernels": KERNELS, "configs": configs}
    folder.write_plan("cpu", plan)
    return folder, measure_order(configs, batch_size)


def _shard(path: Path, rows: list, seed: int = SEED, metadata: bool = True, blocks_plus: int = 0) -> Path:
    """A shard of ``rows`` (sample id, sampler, config) as a worker writes it (``metadata``: with the digest
    of its configurations and its seed; without: as shards were written before)."""
    records = [
        {
            "sample_id": i,
            "gpu_class": "cpu",
            "status": "ok",
            "seed": seed,
            "a.blocks": c["a.blocks"] + blocks_plus,
            "a.threads": c["a.threads"],
        }
        for i, _, c in rows
    ]
    schema = SCHEMA
    if metadata:
        measured = [(i, s, {**c, "a.blocks": c["a.blocks"] + blocks_plus}) for i, s, c in rows]
        schema = SCHEMA.with_metadata({**SCHEMA.metadata, **shard_metadata(measured, PARAMS, seed)})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(records, schema=schema), path)
    return path


@pytest.mark.parametrize(
    "kind, words",
    [
        (dict(seed=SEED + 1), f"measured with seed {SEED + 1}, this sweep's is {SEED}"),
        (dict(blocks_plus=1), "its configurations are not this folder's plan"),
        (dict(seed=SEED + 1, metadata=False), f"measured with seed {SEED + 1}"),
        (dict(blocks_plus=1, metadata=False), "its configurations are not this folder's plan"),
    ],
)
def test_a_shard_of_another_plan_with_the_right_ids_is_set_aside_and_merge_refuses_it(tmp_path, kind, words):
    folder, order = _folder(tmp_path)
    (b0, rows0), (b1, rows1), (b2, rows2) = order
    _shard(folder.shard_path("cpu", b0), rows0)
    _shard(folder.shard_path("cpu", b2), rows2)
    _shard(folder.shard_path("cpu", b1), rows1, **kind)
    with pytest.raises(UserError, match=f"shard-{b1}.parquet: {words}") as err:
        merge(tmp_path)
    assert "\n" not in str(err.value) and not folder.merged_dir.exists()
    lines: list[str] = []
    todo, done = pending_batches(tmp_path, "cpu", order, SCHEMA, lines.append, Planned(PARAMS, SEED))
    assert done == 2 and [b for b, _ in todo] == [b1]
    assert len(lines) == 1 and words in lines[0] and "set aside" in lines[0]
    assert folder.shard_path("cpu", b1).with_name(f"shard-{b1}.parquet.incomplete-1").exists()


def test_shards_of_the_plan_with_or_without_their_digest_are_finished_and_merge(tmp_path):
    folder, order = _folder(tmp_path)
    for k, (batch, rows) in enumerate(order):
        _shard(folder.shard_path("cpu", batch), rows, metadata=k != 1)  # one written before digests
    todo, done = pending_batches(tmp_path, "cpu", order, SCHEMA, None, Planned(PARAMS, SEED))
    assert todo == [] and done == 3
    merged = merge(tmp_path)
    assert merged.num_rows == 12
    part = pq.read_table(merged.path / "gpu_class=cpu" / "part-0.parquet")
    assert b"launchtune.configs" not in (part.schema.metadata or {})  # one shard's digest is not the merge's


@pytest.mark.parametrize(
    "edit, named",
    [
        (lambda m: m["spec"].update(seed=SEED + 1), "spec.seed"),
        (lambda m: m["spec"].update(samples=24), "spec.samples"),
        (lambda m: m["planning_key"].update(samples=24), "planning_key"),
        (lambda m: m.pop("checksums"), None),  # no checksums: read as a folder from before them
    ],
)
def test_an_edited_sweep_json_is_refused_naming_what_differs(tmp_path, edit, named):
    folder, order = _folder(tmp_path)
    for batch, rows in order:
        _shard(folder.shard_path("cpu", batch), rows)
    meta = json.loads(folder.meta_path.read_text())
    edit(meta)
    folder.meta_path.write_text(json.dumps(meta))
    if named is None:
        assert folder.read_meta()["spec"]["seed"] == SEED
        return
    with pytest.raises(EditedFile, match=f"sweep.json: edited since the sweep wrote it \\({named}") as err:
        merge(tmp_path)
    assert "\n" not in str(err.value) and "--force" in str(err.value)
    with pytest.raises(EditedFile):
        start_afresh_if_edited(tmp_path, force=False, classes=None, log=print)
    with pytest.raises(EditedFile):
        start_afresh_if_edited(tmp_path, force=True, classes=["cpu"], log=print)
    lines: list[str] = []
    start_afresh_if_edited(tmp_path, force=True, classes=None, log=lines.append)  # --force: afresh
    assert not folder.meta_path.exists() and not folder.shards() and "starting it afresh" in lines[0]


def test_an_edited_plan_is_refused(tmp_path):
    folder, order = _folder(tmp_path)
    for batch, rows in order:
        _shard(folder.shard_path("cpu", batch), rows)
    other = tmp_path / "other"
    plan = {
        "params": PARAMS,
        "values": {},
        "default": {},
        "kernels": KERNELS,
        "configs": [("random", CONFIG)] * 12,
    }
    SweepFolder(other).write_plan("cpu", plan)
    (tmp_path / "plan/cpu.configs.parquet").write_bytes((other / "plan/cpu.configs.parquet").read_bytes())
    with pytest.raises(EditedFile, match="cpu.json: edited since it was planned \\(its configurations file"):
        merge(tmp_path)
    facts = json.loads(folder.plan_path("cpu").read_text())
    facts["params"] = ["a.threads", "a.blocks"]
    folder.plan_path("cpu").write_text(json.dumps(facts))
    with pytest.raises(EditedFile, match="its facts"):
        folder.read_plan("cpu")


def test_a_plan_is_reused_only_by_a_sweep_that_planned_it_alike(tmp_path):
    spec = parse_spec(base_spec(seed=SEED), "spec.yaml")
    as_json = json.loads(json.dumps(spec.to_dict()))
    plan = {
        "params": PARAMS,
        "values": {},
        "default": {},
        "kernels": KERNELS,
        "configs": [("random", CONFIG)],
    }
    SweepFolder(tmp_path).write_plan("cpu", {**plan, "planned_with": {k: as_json[k] for k in PLANNED_WITH}})
    assert plan_class(None, spec, "cpu", tmp_path, replan=False, limit=1)["configs"]  # reused: no client
    other = parse_spec(base_spec(seed=SEED + 1), "spec.yaml")
    with pytest.raises(UserError, match=f"cpu.json: planned with seed={SEED}, not {SEED + 1}"):
        plan_class(None, other, "cpu", tmp_path, replan=False, limit=1)


@pytest.mark.slow
def test_a_sweep_sets_aside_a_shard_of_another_seed_and_refuses_an_edited_sweep_json(tmp_path, write_spec):
    spec = write_spec(samples=12, batch_size=4)
    a, b = tmp_path / "a", tmp_path / "b"
    with ThreadPoolExecutor(max_workers=2) as pool:  # the two sweeps side by side, each a process of its own
        runs = [
            pool.submit(
                run_cli, "sweep", str(spec), "--out", str(out), "--seed", seed, cwd=tmp_path, timeout=300
            )
            for out, seed in ((a, "1"), (b, "2"))
        ]
        for run in runs:
            done = run.result()
            assert done.returncode == 0, done.stderr[-2000:]
    shard = "shards/gpu_class=cpu/shard-00001.parquet"
    (a / shard).write_bytes((b / shard).read_bytes())  # same ids, another seed's configurations
    again = run_cli("sweep", str(spec), "--out", str(a), "--seed", "1", cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "measured with seed 2, this sweep's is 1" in again.stdout and "set aside" in again.stdout
    merged = pq.read_table(a / "merged", partitioning="hive")
    assert merged.num_rows == 12 and set(merged.column("seed").to_pylist()) == {1}
    meta = json.loads((a / "sweep.json").read_text())
    meta["spec"]["samples"] = meta["planning_key"]["samples"] = 24
    (a / "sweep.json").write_text(json.dumps(meta))
    line = one_line_error(
        run_cli_here("sweep", str(spec), "--out", str(a), "--samples", "24", "--seed", "1", cwd=tmp_path)
    )
    assert "sweep.json: edited since the sweep wrote it" in line and "spec.samples" in line
