"""Write errors after the measuring (a full or read-only disk while the models, figures, report or the
performance report are written): one line naming the path, exit 2, what was written kept; the same command
on a writable disk then finishes. The disk is made to fail in this process (``os.replace``, the last step
of every atomic write, ``kernels.atomic``, and ``os.rename``, the merge's), since the tests run as root,
where a read-only mode forbids nothing."""

from __future__ import annotations

import errno
import os
import shutil

import pytest
import yaml

from launchtune.pipeline.cli import main
from tests.pipeline.conftest import base_spec, run_cli


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    root = tmp_path_factory.mktemp("measured")
    spec = root / "spec.yaml"
    spec.write_text(yaml.safe_dump(base_spec(samples=20)))
    out = root / "out"
    result = run_cli("sweep", str(spec), "--out", str(out), cwd=root, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def _failing_disk(monkeypatch, code: int) -> list[str]:
    tried: list[str] = []
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        tried.append(str(dst))
        raise OSError(code, os.strerror(code), str(dst))

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "rename", replace)  # Path.rename: the merge renames its new folder into place
    assert real is not replace
    return tried


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
@pytest.mark.parametrize("command", ["merge", "train", "report"])
def test_a_write_error_after_measuring_is_one_line_and_a_rerun_finishes(
    measured, tmp_path, monkeypatch, capsys, command, code
):
    folder = tmp_path / "copy"
    shutil.copytree(measured, folder)
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    with monkeypatch.context() as m:
        tried = _failing_disk(m, code)
        assert main([command, str(folder)]) == 2
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {tried[0]}: {os.strerror(code)}"), err
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before  # nothing half-written
    assert main([command, str(folder)]) == 0  # the same command on a writable disk finishes


class _FullDiskReport:
    """distributed.performance_report on a full disk: its file is written on the way out, and fails."""

    def __init__(self, filename: str):
        self.filename = filename

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.filename)


def test_the_performance_report_failing_never_replaces_the_error_that_stopped_the_sweep(
    tmp_path, monkeypatch
):
    import distributed

    from launchtune.pipeline.errors import UserError
    from launchtune.pipeline.sweep.run import performance_report

    monkeypatch.setattr(distributed, "performance_report", _FullDiskReport)
    notes: list[str] = []
    path = tmp_path / "dask-performance.html"
    with pytest.raises(UserError, match="cannot write shard"):
        with performance_report(path, notes.append):
            raise UserError("cannot write shard-00000.parquet: No space left on device")
    assert len(notes) == 1 and "no Dask performance report" in notes[0] and "No space left" in notes[0]
    notes.clear()
    with performance_report(path, notes.append):  # a sweep that measured everything: a note, not an error
        pass
    assert len(notes) == 1 and not path.exists() and not list(tmp_path.iterdir())


@pytest.mark.parametrize("command", ["train", "report"])
def test_a_merged_part_without_total_ms_is_one_line(measured, tmp_path, capsys, command):
    import pyarrow.parquet as pq

    folder = tmp_path / "copy"
    shutil.copytree(measured, folder)
    (part,) = (folder / "merged").rglob("*.parquet")
    pq.write_table(pq.read_table(part).drop(["total_ms"]), part)
    assert main([command, str(folder)]) == 2
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(lines) == 1 and "the merged data has no column 'total_ms'" in lines[0], lines
