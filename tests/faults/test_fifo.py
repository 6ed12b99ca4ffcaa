"""No hang: a FIFO, a device or a directory where the project reads a file is one line naming it.

Each case runs in a subprocess with a timeout that only a hang exceeds (opening a FIFO for reading blocks
until a writer comes, which here is never)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from launchtune.pipeline.store.folder import SweepFolder
from tests.faults.test_plan_checks import _folder, _shard
from tests.pipeline.conftest import REPO, one_line_error, run_cli

HANG = 120  # seconds: far above what any case takes; only a hang reaches it


def _measured(tmp_path: Path) -> tuple[SweepFolder, list]:
    folder, order = _folder(tmp_path / "sweep")
    for batch, rows in order:
        _shard(folder.shard_path("cpu", batch), rows)
    return folder, order


def _replace(path: Path, kind: str) -> None:
    """Put a FIFO, a symlink to a character device or a directory where ``path`` is."""
    if path.is_dir():
        path.rmdir()
    else:
        path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")  # reading it never ends
    else:
        path.mkdir()


@pytest.mark.parametrize("kind", ["fifo", "device", "dir"])
@pytest.mark.parametrize(
    "target, names",
    [
        ("shards/gpu_class=cpu/shard-00001.parquet", "shard"),
        ("sweep.json", "sweep description"),
        ("plan/cpu.json", "plan"),
        ("plan/cpu.configs.parquet", "plan configurations"),
    ],
)
def test_merge_names_a_non_regular_file_in_one_line(tmp_path, kind, target, names):
    folder, _ = _measured(tmp_path)
    _replace(folder.path / target, kind)
    line = one_line_error(run_cli("merge", str(folder.path), cwd=tmp_path, timeout=HANG))
    assert target.split("/")[-1] in line and names in line and "where a" in line
    assert not folder.merged_dir.exists()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_reading_merged_data_or_a_json_record_names_a_fifo_in_one_line(tmp_path, kind):
    folder, _ = _measured(tmp_path)
    from launchtune.pipeline.store.shards import merge

    merge(folder.path)
    part = next(folder.merged_dir.glob("gpu_class=cpu/*.parquet"))
    _replace(part, kind)
    said = _python(
        f"from launchtune.pipeline.store.shards import load_merged\nload_merged(Path({str(folder.path)!r}))"
    )
    assert part.name in said and "where a merged data file belongs" in said
    line = one_line_error(run_cli("merge", str(folder.path), cwd=tmp_path, timeout=HANG))
    assert part.name in line  # the row count of the old merge is read without blocking too
    _replace(folder.path / "report.json", kind)
    folder_code = f"SweepFolder(Path({str(folder.path)!r}))"
    said = _python(f"from launchtune.pipeline.store.folder import SweepFolder\n{folder_code}.read_report()")
    assert "report.json" in said and "where a report file belongs" in said


def _python(code: str) -> str:
    """What ``code`` raised as a UserError (its message), run in a subprocess that only a hang outlasts."""
    wrapped = "from pathlib import Path\nfrom launchtune.pipeline.errors import UserError\ntry:\n"
    wrapped += "".join(f"    {line}\n" for line in code.splitlines())
    wrapped += "except UserError as e:\n    print(e)\n"
    done = subprocess.run(
        [sys.executable, "-c", wrapped],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_rerun_sets_a_fifo_named_like_a_shard_aside_and_measures_its_batch(tmp_path):
    folder, order = _measured(tmp_path)
    fifo = folder.shard_path("cpu", order[1][0])
    _replace(fifo, "fifo")
    code = (
        "from pathlib import Path\n"
        "from launchtune.pipeline.store.shards import Planned, pending_batches\n"
        "from launchtune.pipeline.store.batching import measure_order\n"
        "from launchtune.pipeline.store.folder import SweepFolder\n"
        "from tests.faults.test_shards import SCHEMA, PARAMS\n"
        f"out = Path({str(folder.path)!r})\n"
        "plan = SweepFolder(out).read_plan('cpu')\n"
        "order = measure_order(plan['configs'], 5)\n"
        "todo, done = pending_batches(out, 'cpu', order, SCHEMA, print, Planned(PARAMS, 7))\n"
        "print('todo', [b for b, _ in todo], 'done', done)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        f"todo ['{order[1][0]}'] done 2" in done.stdout and "a FIFO where a shard file belongs" in done.stdout
    )
    assert fifo.with_name(fifo.name + ".incomplete-1").exists()  # set aside, not deleted


def test_a_fifo_named_like_the_sweep_lock_is_one_line(tmp_path, write_spec):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / ".sweep.lock")
    line = one_line_error(run_cli("sweep", str(write_spec()), "--out", str(out), cwd=tmp_path, timeout=HANG))
    assert ".sweep.lock" in line and "a FIFO where a sweep lock file belongs" in line


def test_a_fifo_where_a_model_file_belongs_is_one_line(tmp_path):
    model = tmp_path / "models" / "cpu" / "mlp.skops"
    model.parent.mkdir(parents=True)
    os.mkfifo(model)
    said = _python(
        f"from launchtune.pipeline.learn.models import load_model\nload_model(Path({str(model)!r}))"
    )
    assert "mlp.skops" in said and "a FIFO where a model file belongs" in said
