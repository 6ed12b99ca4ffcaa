"""The README's measured figures are generated from committed data (``python -m tools.readme``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import blocks, readme

ROOT = Path(__file__).resolve().parents[2]


def test_readme_and_docs_match_the_committed_data(capsys):
    """The CI guard: every generated block of README.md and docs/ is what the data gives."""
    assert readme.main(["--check"]) == 0, capsys.readouterr().out
    text = (ROOT / "README.md").read_text()
    assert "<!-- generated: summary " in text and "<!-- generated: make_test " in text
    # the measured tables live in docs/, and every page there is checked
    pages = readme.checked_files(ROOT)
    assert "docs/results.md" in pages and "docs/tridiag.md" in pages
    assert sum((ROOT / p).read_text().count("<!-- generated: ") for p in pages) >= 20  # the blocks are there


def test_a_new_docs_page_is_checked_without_being_listed(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(readme.BLOCKS, "t", blocks.file_block("data/table.md"))
    root = _root_with(tmp_path, "t", "| a |\n")
    (root / "docs").mkdir()
    (root / "docs" / "new.md").write_text(
        "<!-- generated: t (python -m tools.readme) -->\nstale\n<!-- end generated: t -->\n"
    )
    (root / "README.md").write_text("# t\n")
    assert readme.main(["--check", "--root", str(root)]) == 1
    assert "docs/new.md: generated blocks differ" in capsys.readouterr().out


def _root_with(tmp_path: Path, block: str, data: str) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "table.md").write_text(data)
    (tmp_path / "README.md").write_text(
        f"# t\n\nbefore\n<!-- generated: {block} (python -m tools.readme) -->\nstale\n"
        f"<!-- end generated: {block} -->\nafter\n"
    )
    return tmp_path


def test_a_stale_block_is_found_then_rewritten(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(readme.BLOCKS, "t", blocks.file_block("data/table.md"))
    root = _root_with(tmp_path, "t", "| a |\n| 1 |\n")
    assert readme.main(["--check", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "README.md: generated blocks differ" in out and "-stale" in out and "+| 1 |" in out
    assert readme.main(["--root", str(root)]) == 0
    text = (root / "README.md").read_text()
    assert "stale" not in text and "| a |\n| 1 |\n<!-- end generated: t -->\nafter\n" in text
    assert text.startswith("# t\n\nbefore\n")
    assert readme.main(["--check", "--root", str(root)]) == 0
    # the data changes: the check fails again
    (root / "data" / "table.md").write_text("| a |\n| 2 |\n")
    assert readme.main(["--check", "--root", str(root)]) == 1


def test_unknown_block_and_unbalanced_markers_are_one_line_errors(tmp_path, capsys):
    root = _root_with(tmp_path, "no_such_block", "x")
    assert readme.main(["--check", "--root", str(root)]) == 2
    assert "unknown generated block no_such_block" in capsys.readouterr().err
    (root / "README.md").write_text("<!-- generated: cfd_sweeps (python -m tools.readme) -->\nno end\n")
    assert readme.main(["--root", str(root)]) == 2
    assert "not balanced (cfd_sweeps)" in capsys.readouterr().err


def test_missing_data_is_named(tmp_path):
    with pytest.raises(readme.ReadmeError, match="metrics.json: missing"):
        readme.BLOCKS["cfd_combined"](tmp_path)


def test_combined_block_follows_the_metrics(tmp_path):
    """The combined table is computed from metrics.json, not copied: change a value, the table changes."""
    src = ROOT / "data" / "cfd" / "combined" / "sweep_paper" / "models" / "metrics.json"
    metrics = json.loads(src.read_text())
    metrics["comparison"]["h100"]["combined"]["mlp"]["r2"] = 0.5
    dst = tmp_path / "data" / "cfd" / "combined" / "sweep_paper" / "models"
    dst.mkdir(parents=True)
    (dst / "metrics.json").write_text(json.dumps(metrics))
    row = next(
        line for line in readme.BLOCKS["cfd_combined"](tmp_path).splitlines() if line.startswith("| h100")
    )
    assert row.split(" | ")[3] == "0.500"


def test_multi_gpu_table_has_a_row_per_committed_host_and_follows_the_data(tmp_path):
    """Each data/*/*/multi_gpu_scaling/scaling.json is a row, fewest cards first, figures from the file."""
    for host in ("h200x2", "h100x4"):
        src = ROOT / "data" / "cfd" / host / "multi_gpu_scaling" / "scaling.json"
        dst = tmp_path / "data" / "cfd" / host / "multi_gpu_scaling"
        dst.mkdir(parents=True)
        (dst / "scaling.json").write_text(src.read_text())
    rows = [line for line in readme.BLOCKS["multi_gpu_table"](tmp_path).splitlines() if line.startswith("| ")]
    assert [r.split(" | ")[0] for r in rows[2:]] == ["| 2 x H200", "| 4 x H100"]
    assert "5,700\\* / 6,600" in rows[3]  # the one-card run that stopped at its time limit is marked
    four = tmp_path / "data" / "cfd" / "h100x4" / "multi_gpu_scaling" / "scaling.json"
    s = json.loads(four.read_text())
    s["scaling"]["speedup"] = 3.5
    four.write_text(json.dumps(s))
    assert "| 3.50x |" in readme.BLOCKS["multi_gpu_table"](tmp_path)
    assert "3.50x on 4 H100s" in readme.BLOCKS["multi_gpu_summary"](tmp_path)


def test_multi_gpu_blocks_without_data_are_named(tmp_path):
    with pytest.raises(readme.ReadmeError, match="multi_gpu_scaling/scaling.json"):
        readme.BLOCKS["multi_gpu_table"](tmp_path)
