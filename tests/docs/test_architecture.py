"""docs/ARCHITECTURE.md is a one-page map whose every path exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "ARCHITECTURE.md"
# a path in backticks: a top-level folder of the repository, then more
_PATH = re.compile(r"`((?:launchtune|kernels|pipeline|tools|benchmarks|lab|data|tests|docs)/[\w./-]*)`")


def test_the_map_is_one_page():
    lines = PAGE.read_text().splitlines()
    assert len(lines) <= 150
    assert max(len(line) for line in lines) <= 120


def test_every_path_on_the_map_exists():
    paths = _PATH.findall(PAGE.read_text())
    assert len(paths) > 20  # the check reads the page's paths
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, missing


def test_the_path_check_finds_a_missing_path(tmp_path):
    assert _PATH.findall("the owner is `pipeline/nowhere.py` and `kernels/space.py`") == [
        "pipeline/nowhere.py",
        "kernels/space.py",
    ]
