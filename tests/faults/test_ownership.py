"""Nothing lost: the project deletes or replaces files only in folders it made (its ``.launchtune`` marker, or
a ``sweep.json`` made before markers), and ``merge`` never replaces merged rows with fewer."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.learn.combine import combine
from launchtune.pipeline.store.folder import SweepFolder
from launchtune.pipeline.store.ownership import MARKER, owner, write_marker
from launchtune.pipeline.store.shards import merge
from tests.faults.test_shards import _planned_folder, _table, _write
from tests.pipeline.conftest import one_line_error, run_cli_here
from tests.pipeline.test_combine import make_sweep


def _quiet(_: str) -> None:
    pass


@pytest.fixture
def sources(tmp_path):
    return [make_sweep(tmp_path / "a", "v100", 2.0, n=20), make_sweep(tmp_path / "b", "h100", 1.0, n=20)]


def test_combine_refuses_a_folder_of_user_files_and_keeps_them(tmp_path, sources):
    out = tmp_path / "mine"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "fig1.svg").write_text("<svg/>")
    with pytest.raises(UserError, match="holds files launchtune did not make") as err:
        combine(out, sources, log=_quiet, train=False)
    assert "\n" not in str(err.value)
    assert (out / "figures" / "fig1.svg").read_text() == "<svg/>" and sorted(out.iterdir()) == [
        out / "figures"
    ]


def test_combine_refuses_a_measured_sweep_whose_sweep_json_is_lost_and_keeps_its_shards(tmp_path, sources):
    folder, order = _planned_folder(tmp_path / "measured")
    write_marker(folder.path, "sweep")  # as the sweep marks the new folder it claims
    for batch, rows in order:
        _write(folder.shard_path("cpu", batch), [r[0] for r in rows])
    folder.meta_path.unlink()
    with pytest.raises(UserError, match="holds a measured sweep"):
        combine(folder.path, sources, log=_quiet, train=False)
    assert len(folder.shards()) == len(order)


def test_combine_writes_into_a_new_or_empty_folder_or_its_own_and_marks_it(tmp_path, sources):
    empty = tmp_path / "empty"
    empty.mkdir()
    combine(empty, sources, log=_quiet, train=False)
    assert owner(empty) == "combined" and json.loads((empty / MARKER).read_text())["kind"] == "combined"
    (empty / "NOTES.md").write_text("kept")
    combine(empty, sources, log=_quiet, train=False)  # its own folder: replaced, the user's file kept
    assert (empty / "NOTES.md").read_text() == "kept"


def test_a_combined_folder_made_before_markers_counts_as_combines(tmp_path, sources):
    out = tmp_path / "old"
    combine(out, sources, log=_quiet, train=False)
    (out / MARKER).unlink()  # as the committed folders were written
    assert owner(out) == "combined"
    combine(out, sources, log=_quiet, train=False)


def test_the_combine_cli_refuses_with_one_line(tmp_path, sources):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "paper.tex").write_text("x")
    line = one_line_error(run_cli_here("combine", str(out), *map(str, sources), cwd=tmp_path))
    assert str(out) in line and "did not make" in line and (out / "paper.tex").exists()


def test_the_sweep_refuses_an_out_folder_of_user_files_before_anything_starts(tmp_path, write_spec):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "report.md").write_text("my report")
    line = one_line_error(run_cli_here("sweep", str(write_spec()), "--out", str(out), cwd=tmp_path))
    assert "did not make" in line and "--out" in line
    assert (out / "report.md").read_text() == "my report" and not (out / MARKER).exists()


def test_clear_refuses_a_folder_the_project_did_not_make(tmp_path):
    (tmp_path / "shards").mkdir()
    with pytest.raises(UserError, match="refusing to clear it"):
        SweepFolder(tmp_path).clear("sweep")
    assert (tmp_path / "shards").is_dir()


def _merged_rows(folder: SweepFolder) -> int:
    return sum(pq.read_metadata(p).num_rows for p in folder.merged_dir.glob("*/*.parquet"))


@pytest.mark.parametrize("lose", ["plan", "sweep.json", "batch_size"])
def test_merge_without_a_readable_plan_refuses_and_keeps_the_merged_rows(tmp_path, lose):
    folder, order = _planned_folder(tmp_path)
    for batch, rows in order:
        _write(folder.shard_path("cpu", batch), [r[0] for r in rows])
    assert merge(tmp_path).num_rows == 12
    folder.shards()[-1].unlink()
    if lose == "plan":
        for p in (tmp_path / "plan").iterdir():
            p.unlink()
    elif lose == "sweep.json":
        folder.meta_path.unlink()
    else:
        meta = json.loads(folder.meta_path.read_text())
        meta["spec"]["batch_size"] = "5"
        folder.meta_path.write_text(json.dumps(meta))
    for allow in (False, True):  # no plan: nothing to check against, even with --allow-missing
        with pytest.raises(UserError) as err:
            merge(tmp_path, allow_missing=allow)
        assert "\n" not in str(err.value)
    assert _merged_rows(folder) == 12


def test_merge_never_replaces_a_class_with_fewer_rows_without_allow_missing(tmp_path):
    folder, order = _planned_folder(tmp_path)
    for batch, rows in order:
        _write(folder.shard_path("cpu", batch), [r[0] for r in rows])
    other = {"params": ["a.blocks", "a.threads"], "values": {}, "default": {}, "kernels": ["a"]}
    folder.write_plan("h100", {**other, "configs": [("random", {"a.blocks": 1, "a.threads": 32})] * 5})
    folder.shard_dir("h100").mkdir(parents=True)
    pq.write_table(_table([0, 1, 2, 3, 4], cls="h100"), folder.shard_path("h100", "00000"))
    assert merge(tmp_path).rows_per_class == {"cpu": 12, "h100": 5}
    folder.shard_path("h100", "00000").unlink()  # every shard of a class gone
    with pytest.raises(UserError, match="merged/ holds 5 rows of class h100, its shards 0") as err:
        merge(tmp_path)
    assert "--allow-missing" in str(err.value) and _merged_rows(folder) == 17
    lines: list[str] = []
    assert merge(tmp_path, allow_missing=True, log=lines.append).rows_per_class == {"cpu": 12}
    assert len(lines) == 1 and "h100" in lines[0]


def test_the_merge_cli_refuses_without_a_plan_with_one_line(tmp_path):
    folder, order = _planned_folder(tmp_path)
    for batch, rows in order[:-1]:
        _write(folder.shard_path("cpu", batch), [r[0] for r in rows])
    for p in (tmp_path / "plan").iterdir():
        p.unlink()
    line = one_line_error(run_cli_here("merge", str(tmp_path), cwd=tmp_path))
    assert "plan/cpu.json" in line and not folder.merged_dir.exists()
