"""Every JSON file the project reads back has a schema (``pipeline.records``): a wrong type, a missing key or
a NaN where a number belongs is one line naming the file and the key."""

from __future__ import annotations

import glob
import json
import math
from pathlib import Path

import pytest

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.datasets import load_kernel_tuner_cache
from launchtune.pipeline.store.folder import SweepFolder
from launchtune.pipeline.store.ownership import MARKER, marker_kind
from tests.faults.test_plan_checks import _folder, _shard
from tests.pipeline.conftest import REPO, one_line_error, run_cli_here

NAN = math.nan


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    data.pop("checksums", None)  # as a file from before checksums: the schema alone decides
    path.write_text(json.dumps(data))  # NaN and Infinity written as Python writes them


GOOD_RECORDS = {
    "models/metrics.json": {
        "data_hash": "ab",
        "groups": {"cpu": {"rows": 12, "models": {"mlp": {"r2": NAN}}}},
    },
    "validation.json": {"cpu": {"candidates": [{"config": {"a.blocks": 1}, "total_ms": 1.5}], "repeats": 3}},
    "timing.json": {"rows": 12, "seconds": 3.0, "samples_per_minute": 240.0, "workers": 1},
    "report.json": {"sweep_id": "fake", "classes": {"cpu": {}}, "figures": ["a.png"]},
    "tuning_table.json": {
        "format": "launchtune-tuning-table",
        "entries": [{"best": {"a.blocks": 1}, "best_ms": 1.0}],
    },
}
READERS = {
    "models/metrics.json": "read_metrics",
    "validation.json": "read_validation",
    "timing.json": "read_timing",
    "report.json": "read_report",
    "tuning_table.json": "read_tuning_table",
}


@pytest.mark.parametrize(
    "file, change, named",
    [
        ("sweep.json", lambda m: m["spec"].update(seed="x"), "spec.seed: must be an integer, not 'x'"),
        (
            "sweep.json",
            lambda m: m["spec"].update(batch_size="5"),
            "spec.batch_size: '5' is not a valid value",
        ),
        ("sweep.json", lambda m: m.pop("spec"), "(top level): 'spec' is a required property"),
        ("sweep.json", lambda m: m["spec"].update(test_fraction=NAN), "spec.test_fraction: must be a finite"),
        ("sweep.json", lambda m: m["plan"].update(params=3), "plan.params: must be a list, not 3"),
        ("plan/cpu.json", lambda p: p.update(params="a.blocks"), "params: must be a list"),
        (
            "plan/cpu.json",
            lambda p: p["default"].update({"a.blocks": 1.5}),
            "default.a.blocks: must be an integer",
        ),
        ("plan/cpu.json", lambda p: p.update(kernels=[1]), "kernels[0]: must be a string, not 1"),
        ("plan/cpu.json", lambda p: p.update(n_configs=-1), "n_configs: -1 is out of range"),
    ],
)
def test_a_broken_sweep_json_or_plan_is_one_line_naming_file_and_key(tmp_path, file, change, named):
    folder, order = _folder(tmp_path)
    meta = json.loads(folder.meta_path.read_text())
    meta["plan"] = {"params": ["a.blocks", "a.threads"], "values": {}, "default": {}, "kernels": ["a"]}
    folder.write_meta(meta)
    for batch, rows in order:
        _shard(folder.shard_path("cpu", batch), rows)
    _edit(tmp_path / file, change)
    with pytest.raises(UserError) as err:
        folder.read_meta() if file == "sweep.json" else folder.read_plan("cpu")
    message = str(err.value)
    assert message.startswith(f"{tmp_path / file}: ") and named in message and "\n" not in message
    line = one_line_error(run_cli_here("merge", str(tmp_path), cwd=tmp_path))
    assert file in line and named in line


@pytest.mark.parametrize(
    "file, change, named",
    [
        (
            "models/metrics.json",
            lambda m: m["groups"]["cpu"].update(rows=NAN),
            "groups.cpu.rows: must be an integer",
        ),
        (
            "models/metrics.json",
            lambda m: m["groups"]["cpu"].pop("models"),
            "'models' is a required property",
        ),
        ("models/metrics.json", lambda m: m.update(groups=[]), "groups: must be a mapping, not []"),
        ("models/metrics.json", lambda m: m.pop("groups"), "'groups' is a required property"),
        (
            "validation.json",
            lambda v: v["cpu"].update(default={}),
            "'config' is a required property",
        ),
        (
            "validation.json",
            lambda v: v["cpu"]["candidates"][0].update(total_ms=NAN),
            "candidates[0].total_ms",
        ),
        (
            "validation.json",
            lambda v: v["cpu"].update(repeats="3"),
            "cpu.repeats: must be an integer, not '3'",
        ),
        ("timing.json", lambda t: t.update(seconds=math.inf), "seconds: must be a finite number, not inf"),
        ("report.json", lambda r: r.update(figures="a.png"), "figures: must be a list"),
        ("tuning_table.json", lambda t: t["entries"][0].update(best_ms=NAN), "entries[0].best_ms"),
        ("tuning_table.json", lambda t: t.pop("entries"), "field 'entries' (a list) is missing"),
    ],
)
def test_a_broken_record_is_one_line_naming_file_and_key(tmp_path, file, change, named):
    folder = SweepFolder(tmp_path)
    path = tmp_path / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(GOOD_RECORDS[file]))
    assert getattr(folder, READERS[file])() == json.loads(json.dumps(GOOD_RECORDS[file]))  # NaN score: fine
    _edit(path, change)
    with pytest.raises(UserError) as err:
        getattr(folder, READERS[file])()
    assert str(err.value).startswith(f"{path}: ") and named in str(err.value) and "\n" not in str(err.value)


def test_a_broken_marker_is_one_line(tmp_path):
    (tmp_path / MARKER).write_text(json.dumps({"kind": "mine", "id": "x"}))
    with pytest.raises(
        UserError, match=r"\.launchtune: kind: must be one of 'sweep', 'combined', not 'mine'"
    ):
        marker_kind(tmp_path)


@pytest.mark.parametrize(
    "cache, named",
    [
        ({"tune_params_keys": ["a"], "cache": []}, "cache: must be a mapping, not []"),
        ({"tune_params_keys": "a", "cache": {}}, "tune_params_keys: must be a list"),
        ({"tune_params_keys": ["a"], "cache": {"1": 5}}, "cache.1: must be a mapping, not 5"),
        ({"tune_params_keys": [], "cache": {}}, "tune_params_keys: [] is out of range"),
    ],
)
def test_a_kernel_tuner_cache_of_the_wrong_shape_is_one_line(tmp_path, cache, named):
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(cache))
    with pytest.raises(UserError) as err:
        load_kernel_tuner_cache(path)
    assert named in str(err.value) and "\n" not in str(err.value)


def test_every_committed_sweep_folder_reads_clean():
    folders = sorted({Path(p).parent for p in glob.glob(str(REPO / "data/**/sweep.json"), recursive=True)})
    assert folders
    for path in folders:
        folder = SweepFolder(path)
        assert folder.read_meta() is not None
        for plan in (path / "plan").glob("*.json"):
            assert folder.read_plan_facts(plan.stem) is not None  # committed plans are slimmed
        for reader in READERS.values():
            getattr(folder, reader)()
