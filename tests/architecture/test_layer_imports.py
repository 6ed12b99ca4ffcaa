"""Inside a layer (kernels/ or pipeline/) the project's own modules are imported relatively (``from ..space
import Space``), and another layer absolutely (``from launchtune.kernels.space import Space``): a reader of
imports as text resolves each import inside a layer from the file's own position, and an import that crosses
layers says so by its name."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("kernels", "pipeline")


def misplaced_imports(source: str, layer: str, depth: int) -> list[str]:
    """``line N: ...`` of each import that breaks the rule, for a file ``depth`` folders below ``layer/``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names, level = [a.name for a in node.names], 0
        elif isinstance(node, ast.ImportFrom):
            names, level = [node.module or ""], node.level
        else:
            continue
        if level > depth + 1:  # climbs out of the layer: another layer is named absolutely
            found.append(f"line {node.lineno}: a relative import above {layer}/")
        found += [
            f"line {node.lineno}: {n} (same layer: import it relatively)"
            for n in names
            if level == 0 and n.split(".")[:2] == ["launchtune", layer]
        ]
    return found


def test_the_check_finds_what_breaks_the_rule():
    source = "import os\nfrom launchtune.kernels import space\nfrom launchtune.pipeline import cli\n"
    assert misplaced_imports(source, "kernels", 0) == [
        "line 2: launchtune.kernels (same layer: import it relatively)"
    ]
    assert misplaced_imports("from ...kernels.space import Space\n", "pipeline", 1) == [
        "line 1: a relative import above pipeline/"
    ]
    assert misplaced_imports("from ..store.folder import SweepFolder\nfrom . import x\n", "pipeline", 1) == []


def test_each_layer_imports_itself_relatively_and_the_other_by_name():
    wrong, files = [], 0
    for layer in LAYERS:
        for path in sorted((REPO / layer).rglob("*.py")):
            files += 1
            depth = len(path.relative_to(REPO / layer).parts) - 1
            wrong += [
                f"{path.relative_to(REPO)}: {hit}"
                for hit in misplaced_imports(path.read_text(), layer, depth)
            ]
    assert files > 100  # the check reads both layers
    assert not wrong, "\n".join(wrong)
