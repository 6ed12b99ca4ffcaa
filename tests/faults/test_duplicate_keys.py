"""A key twice in one JSON object (issue 43): ``json`` keeps the last one silently, so a Kernel Tuner cache
entry with two ``time``s, a tuning table whose ``best`` names a parameter twice, or a sweep folder's record
was read as one of its values, unnoticed. Each is one line naming the file and the key; a journal line with
a key twice is not an answer (its tail is measured again), never the last of its values."""

from __future__ import annotations

import gzip
import json

import pytest

from launchtune.kernels.tuning_table import TableError, TuningTable
from launchtune.pipeline.commands.export import write_c_header
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.datasets import load_kernel_tuner_cache
from launchtune.pipeline.store.journal import Journal
from tests.kernel.test_header_property import _folder
from tests.pipeline.conftest import one_line_error, run_cli_here

ENTRY = '"{a}": {{"a": {a}, "b": 8, "time": {t}, "times": [{t}, {t}]}}'
TWICE = "key 'time' twice in one object"


def _cache_text(first: str) -> str:
    entries = ", ".join([first] + [ENTRY.format(a=a, t=1.0 + a) for a in (2, 4)])
    return '{"tune_params_keys": ["a", "b"], "device_name": "NVIDIA A100", "cache": {' + entries + "}}"


@pytest.mark.parametrize("gz", [False, True])
def test_a_cache_entry_with_a_key_twice_is_one_line_naming_the_file_and_key(tmp_path, gz):
    text = _cache_text('"1": {"a": 1, "b": 8, "time": 9.0, "times": [9.0], "time": 0.5}')
    path = tmp_path / ("A100.json.gz" if gz else "A100.json")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    with pytest.raises(UserError) as info:
        load_kernel_tuner_cache(path)
    assert str(info.value).startswith(f"{path}: Kernel Tuner cache: {TWICE}")
    # the same file without its second "time" is read: the refusal is the duplicate's
    text = _cache_text('"1": {"a": 1, "b": 8, "time": 9.0, "times": [9.0]}')
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    assert len(load_kernel_tuner_cache(path).frame) == 3


def test_a_cache_with_a_key_twice_is_exit_2_and_one_line_from_the_cli(tmp_path):
    path = tmp_path / "A100.json"
    path.write_text(_cache_text('"1": {"a": 1, "b": 8, "time": 9.0, "times": [9.0], "time": 0.5}'))
    line = one_line_error(run_cli_here("strategies", "--dataset", str(path), "--budget", "2", cwd=tmp_path))
    assert str(path) in line and TWICE in line


def test_an_interrupted_cache_with_a_key_twice_is_refused_too(tmp_path):
    """Kernel Tuner's unclosed file (an interrupted run) is closed before parsing: the duplicate is still
    seen, not lost in the second parse."""
    text = _cache_text('"1": {"a": 1, "b": 8, "time": 9.0, "times": [9.0], "time": 0.5}')
    path = tmp_path / "A100.json"
    path.write_text(text.removesuffix("}}") + ",")
    with pytest.raises(UserError, match=TWICE):
        load_kernel_tuner_cache(path)


def test_a_sweep_tuning_table_with_a_parameter_twice_exports_no_header(tmp_path):
    folder = _folder(tmp_path)
    best = '{"block_size_x": 64, "block_size_x": 128}'
    (folder / "tuning_table.json").write_text(
        '{"format": "launchtune.tuning_table/1", "version": 1, '
        '"entries": [{"gpu_class": "h100", "best": ' + best + "}]}"
    )
    header = tmp_path / "x.h"
    with pytest.raises(UserError) as info:
        write_c_header(folder, header)
    assert str(info.value).startswith(str(folder / "tuning_table.json"))
    assert "key 'block_size_x' twice in one object" in str(info.value) and not header.exists()


def test_a_runtime_tuning_table_with_a_key_twice_is_one_line(tmp_path):
    path = tmp_path / "table.json"
    entry = '{"gpu_class": "h100", "size": "16x8", "gpu_class": "a100", "kernel": "k", "candidates": []}'
    path.write_text('{"entries": [' + entry + "]}")
    with pytest.raises(TableError) as info:
        TuningTable.load(path)
    assert str(info.value) == f"{path}: tuning table: key 'gpu_class' twice in one object " + (
        "(which of its values is meant is not known)"
    )


def test_a_sweep_record_with_a_key_twice_is_one_line(tmp_path):
    folder = _folder(tmp_path)
    spec = json.loads((folder / "sweep.json").read_text())["spec"]
    text = json.dumps({"spec": spec, "plan": {}})
    (folder / "sweep.json").write_text(text[:-1] + ', "plan": {"cpu": 1}}')
    line = one_line_error(
        run_cli_here("export", str(folder), str(tmp_path / "x.h"), "--format", "c-header", cwd=tmp_path)
    )
    assert str(folder / "sweep.json") in line and "key 'plan' twice in one object" in line


def test_a_journal_line_with_a_key_twice_is_not_an_answer(tmp_path):
    path = tmp_path / "cpu.jsonl"
    path.write_bytes(
        b'{"event": 0, "order": 0}\n{"event": 1, "order": 2, "order": 5}\n{"event": 2, "order": 1}\n'
    )
    journal = Journal(path)
    assert journal.read() == [(0, 0)] and journal.torn and journal.torn_at == 2


@pytest.mark.parametrize("reader", ["sweep spec", "kernel spec"])
def test_a_yaml_spec_with_a_key_twice_is_one_line_naming_the_line(tmp_path, reader):
    """YAML keeps the last of two equal keys silently too: a sweep spec or a kernel spec naming one twice is
    one line naming the file, the line and the key; ``<<`` merges are not keys."""
    from launchtune.kernels.kernel.fields import read_yaml
    from launchtune.pipeline.yamlio import load_yaml

    load = load_yaml if reader == "sweep spec" else read_yaml
    path = tmp_path / "spec.yaml"
    path.write_text("size: {x: 1}\nname: a\nworkload: cfd\nname: b\n")
    with pytest.raises(Exception) as info:
        load(path)
    message = str(info.value)
    assert (
        message.startswith(f"{path}: malformed YAML (line 4") and "key 'name' twice in one mapping" in message
    )
    path.write_text("name: a\nworkload: cfd\n")
    assert load(path)["name"] == "a"
    path.write_text("base: {x: 1}\nmerged: {<<: {x: 2}, y: 2}\n")  # a merge is not a key twice (no alias)
    assert load(path)["merged"] == {"x": 2, "y": 2}
