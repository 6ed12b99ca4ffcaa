"""Absurd tuning tables are refused on load with one line naming the file and entry, so a tuned run never
locks them and never writes them back as ``source: runtime``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from launchtune.kernels.tuning_table import MAX_DEPTH, TableError, TuningTable
from tests.conftest import REPO


def _table(tmp_path, entry: dict | None = None, text: str | None = None):
    path = tmp_path / "table.json"
    path.write_text(text if text is not None else json.dumps({"entries": [entry]}))
    return path


def _kernel_entry(blocks=400, threads=128, size="3328x1024"):
    return {
        "gpu_class": "h100",
        "size": size,
        "kernel": "xi_flux",
        "source": "runtime",
        "candidates": [{"blocks": blocks, "threads": threads}],
    }


@pytest.mark.parametrize(
    "entry, match",
    [
        (_kernel_entry(threads=0), r"entries\[0\].candidates\[0\]: 'threads' must be 1..1024 \(got 0\)"),
        (_kernel_entry(threads=2048), r"'threads' must be 1..1024 \(got 2048\)"),
        (_kernel_entry(blocks=-1), r"'blocks' must be 1..2147483647 \(got -1\)"),
        (_kernel_entry(blocks=1e30), r"'blocks' must be 1..2147483647 \(got 1e\+30\)"),
        (_kernel_entry(blocks=1.5), "needs integer 'blocks' and 'threads'"),
        (_kernel_entry(blocks="400"), "needs integer 'blocks' and 'threads'"),
        (_kernel_entry(blocks=True), "needs integer 'blocks' and 'threads'"),
        (_kernel_entry(size="0x0"), r"entries\[0\]: field 'size' must be two positive integers"),
        (_kernel_entry(size="104"), "field 'size' must be two positive integers"),
        (_kernel_entry(size="104x32x4"), "field 'size' must be two positive integers"),
        (_kernel_entry(size="-3x4"), "field 'size' must be two positive integers"),
        (_kernel_entry(size=[3328, 0]), "field 'size' must be two positive integers"),
        (
            {"gpu_class": "h100", "size": "3328x1024", "best": {"xi_flux.blocks": 0, "xi_flux.threads": 64}},
            r"entries\[0\].best: 'xi_flux.blocks' must be 1..",
        ),
        (
            {
                "gpu_class": "h100",
                "size": "3328x1024",
                "per_kernel": {"rhs": [{"rhs.blocks": 8, "rhs.threads": 0}]},
            },
            r"entries\[0\].per_kernel.rhs\[0\]: 'rhs.threads' must be 1..1024",
        ),
    ],
)
def test_an_absurd_entry_is_one_error_naming_the_file_and_entry(tmp_path, entry, match):
    path = _table(tmp_path, entry)
    with pytest.raises(TableError, match=match) as err:
        TuningTable.load(path)
    assert str(err.value).startswith(f"{path}: ") and "\n" not in str(err.value)


def test_a_sane_table_still_loads(tmp_path):
    table = TuningTable.load(_table(tmp_path, _kernel_entry(blocks=400.0, threads=1024)))
    assert table.entries[0].params == [(400, 1024)]


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])  # just too deep; deeper than Python recurses
def test_a_deeply_nested_table_is_refused(tmp_path, depth):
    path = _table(tmp_path, text='{"entries": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(TableError, match=f"{path}: nested deeper than a tuning table"):
        TuningTable.load(path)


def test_the_cfd_cli_refuses_an_absurd_table_with_one_line_and_writes_nothing_back(tmp_path):
    path = _table(tmp_path, _kernel_entry(threads=0, size="16x8"))
    before = path.read_text()
    run = [
        sys.executable,
        "-m",
        "launchtune.kernels.cfd",
        "run",
        "--case",
        "inlet",
        "--size",
        "16x8",
        "--backend",
        "numpy",
    ]
    result = subprocess.run(
        [
            *run,
            "--no-plot",
            "--steps",
            "3",
            "--autotune",
            "seeded",
            "--tuning-table",
            str(path),
            "--out",
            str(tmp_path / "run"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {path}: entries[0].candidates[0]: 'threads' must be 1..1024")
    assert path.read_text() == before and not (tmp_path / "run" / "tuning_table.json").exists()
