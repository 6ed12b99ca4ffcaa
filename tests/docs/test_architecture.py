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


# Every product module is on the map: the page names its path (`kernels/space.py`), or its file name in the
# item that names its folder (`pipeline/store/`: ... `spec.py`), or its folder with a wildcard
# (`kernels/cfd/*`: a folder that is one concept, its modules its parts). An item is a table row, a bullet
# with its sub-bullets, or a paragraph. Package markers and entry points (`__init__.py`, `__main__.py`) are
# not modules a reader looks for.
_TICKED = re.compile(r"`([^`\s]+)`")


def _items(text: str) -> list[str]:
    items: list[list[str]] = []
    for line in text.splitlines():
        starts = line.startswith(("|", "- ", "#", "```")) or not items or not items[-1][-1].strip()
        if starts or not line.strip():
            items.append([line])
        else:
            items[-1].append(line)  # a paragraph's next line, a bullet's continuation or sub-bullet
    return [" ".join(lines) for lines in items]


def on_the_map(text: str) -> set[str]:
    """The modules and the wildcards (``kernels/cfd/*``) the page names, by the rule above."""
    named = set()
    for item in _items(text):
        ticked = _TICKED.findall(item)
        folders = [t.removesuffix("*") for t in ticked if t.endswith(("/", "/*"))]
        for t in ticked:
            if t.endswith("/*") or (t.endswith(".py") and "/" in t):
                named.add(t)
            elif t.endswith(".py"):
                named.update(folder + t for folder in folders)
    return named


def product_modules() -> list[str]:
    return sorted(
        str(p.relative_to(ROOT))
        for layer in ("kernels", "pipeline")
        for p in (ROOT / layer).rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    )


def test_every_product_module_is_on_the_map():
    named = on_the_map(PAGE.read_text())
    modules = product_modules()
    assert len(modules) > 100  # the check reads the layers' modules
    missing = [m for m in modules if m not in named and f"{Path(m).parent}/*" not in named]
    assert not missing, f"not on docs/ARCHITECTURE.md's map: {missing}"


def test_the_map_rule_reads_paths_folders_and_wildcards():
    page = (
        "| the space | `kernels/space.py` |\n"
        "| the CFD workload | `kernels/cfd/*` |\n"
        "\n"
        "- `pipeline/store/`: the folder.\n"
        "  - `spec.py`: the spec; `folder.py`,\n"
        "    `shards.py`.\n"
        "- `pipeline/learn/`: surrogates.\n"
        "\n"
        "Elsewhere `train.py` is no module of a named folder.\n"
    )
    assert on_the_map(page) == {
        "kernels/space.py",
        "kernels/cfd/*",
        "pipeline/store/spec.py",
        "pipeline/store/folder.py",
        "pipeline/store/shards.py",
    }
