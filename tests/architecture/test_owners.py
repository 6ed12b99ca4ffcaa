"""One owner per concept, checked from the source: the tuning table has one module (no other names its file
or its format), YAML has one loader (no other module calls a YAML parser), and no two sub-folders of
``kernels/`` or of ``pipeline/`` import each other, directly or round a loop."""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

from launchtune.kernels import tuning_table
from launchtune.kernels.yamlfile import load_yaml
from tests.architecture.test_imports import project_imports

REPO = Path(__file__).resolve().parents[2]
# The code that reads project files: both layers, the package's own modules (not through its links), and
# what a user or the project reruns. Tests are left out: they build broken files on purpose.
SCANNED = ("kernels", "pipeline", "benchmarks", "lab", "tools")
TABLE_OWNER = "kernels/tuning_table.py"
YAML_OWNER = "kernels/yamlfile.py"
# PyYAML's functions and loader classes that turn text into objects (or events, nodes)
YAML_PARSERS = {
    "load",
    "load_all",
    "safe_load",
    "safe_load_all",
    "full_load",
    "full_load_all",
    "unsafe_load",
    "unsafe_load_all",
    "parse",
    "compose",
    "compose_all",
    "scan",
    "Loader",
    "SafeLoader",
    "FullLoader",
    "UnsafeLoader",
    "BaseLoader",
    "CLoader",
    "CSafeLoader",
    "CFullLoader",
    "CUnsafeLoader",
    "CBaseLoader",
}


def _sources() -> Iterator[tuple[str, ast.Module]]:
    paths = [p for top in SCANNED for p in (REPO / top).rglob("*.py")]
    paths += (REPO / "launchtune").glob("*.py")  # launchtune/kernels and launchtune/pipeline are the links
    for path in sorted(paths):
        yield str(path.relative_to(REPO)), ast.parse(path.read_text())


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring constants of a module and its classes and functions."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def table_names(tree: ast.Module) -> list[str]:
    """The literals in ``tree`` that name the tuning table's file (``"tuning_table.json"``, a path ending in
    it) or its format: what a module that opens, reads or writes the table itself must spell. Sentences
    that mention the file (a message, a help text) have spaces and are not names; docstrings are skipped."""
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
            if text == tuning_table.FORMAT or (
                text.endswith(tuning_table.FILE_NAME) and not any(c.isspace() for c in text)
            ):
                found.append(f"line {node.lineno}: {text!r}")
    return found


def yaml_parsers(tree: ast.Module) -> list[str]:
    """Where ``tree`` reaches a YAML parser: ``yaml.safe_load(...)``, ``yaml.SafeLoader``, ``from yaml
    import load``, ``import yaml.loader``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "yaml":
            if node.attr in YAML_PARSERS or node.attr in ("loader", "parser", "composer", "scanner"):
                found.append(f"line {node.lineno}: yaml.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "yaml":
            names = [a.name for a in node.names]
            if node.module != "yaml" or any(n in YAML_PARSERS or n == "*" for n in names):
                found.append(f"line {node.lineno}: from {node.module} import {', '.join(names)}")
        elif isinstance(node, ast.Import):
            deep = [a.name for a in node.names if a.name.startswith("yaml.")]
            found += [f"line {node.lineno}: import {name}" for name in deep]
    return sorted(found, key=lambda hit: int(hit.split()[1].rstrip(":")))


def test_only_the_tuning_table_module_names_its_file_or_format():
    wrong = [
        f"{path}: {hit}" for path, tree in _sources() if path != TABLE_OWNER for hit in table_names(tree)
    ]
    assert not wrong, "open, read or write the tuning table through kernels/tuning_table.py:\n" + "\n".join(
        wrong
    )


def test_the_table_scan_finds_a_module_of_its_own():
    tree = ast.parse(
        '"""Reads tuning_table.json."""\n'
        'PATH = folder / "tuning_table.json"\n'
        'doc = {"format": "launchtune-tuning-table"}\n'
        'log(f"no tuning_table.json in {folder}")\n'
        'other = f"{folder}/tuning_table.json"\n'
    )
    assert [hit.split(":")[0] for hit in table_names(tree)] == ["line 2", "line 3", "line 5"]


def test_only_the_yaml_loader_calls_a_yaml_parser():
    wrong = [
        f"{path}: {hit}" for path, tree in _sources() if path != YAML_OWNER for hit in yaml_parsers(tree)
    ]
    assert not wrong, "read YAML through kernels/yamlfile.py (load_yaml):\n" + "\n".join(wrong)


def test_the_yaml_scan_finds_each_way_to_a_parser():
    tree = ast.parse(
        "import yaml\n"
        "a = yaml.safe_load(text)\n"
        "b = yaml.load(text, Loader=yaml.CSafeLoader)\n"
        "from yaml import safe_load\n"
        "import yaml.parser\n"
        "c = yaml.safe_dump(data)\n"  # writing YAML is not reading it
    )
    assert [hit.split(":")[0] for hit in yaml_parsers(tree)] == [
        "line 2",
        "line 3",
        "line 3",
        "line 4",
        "line 5",
    ]


def _folder(module: str, layer: str) -> str | None:
    """``launchtune.kernels.kernel.pick`` -> ``kernel``: the sub-folder of ``layer`` a module is in (None for
    a module at the top of the layer, which any sub-folder may use)."""
    parts = module.split(".")
    if parts[:2] != ["launchtune", layer] or len(parts) < 3:
        return None
    return parts[2] if (REPO / layer / parts[2]).is_dir() else None


def folder_graph(layer: str) -> dict[str, set[str]]:
    """Sub-folder -> the other sub-folders of ``layer`` its modules import."""
    graph: dict[str, set[str]] = {}
    for module, deps in project_imports().items():
        mine = _folder(module, layer)
        if mine is None:
            continue
        graph.setdefault(mine, set())
        for dep in deps:
            theirs = _folder(dep, layer)
            if theirs is not None and theirs != mine:
                graph[mine].add(theirs)
    return graph


@pytest.mark.parametrize("layer", ["kernels", "pipeline"])
def test_no_two_sub_folders_import_each_other(layer):
    graph = folder_graph(layer)
    assert len(graph) >= 4  # the check reads the layer's folders
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        pytest.fail(f"{layer}/: sub-folders tied both ways: {' -> '.join(exc.args[1])}")


def test_the_folder_graph_sees_the_runtime_tuner_use_the_kernel_spec():
    assert "kernel" in folder_graph("kernels")["autotune"]  # autotune/tuned.py reads a kernel spec


def test_every_yaml_file_in_the_repository_loads_without_an_alias():
    """The shipped configs and specs, the examples, the committed data's specs and the tests' fixtures: each
    one is what a user copies, so each loads through the one loader (no alias, within its bounds)."""
    listed = subprocess.run(
        ["git", "ls-files", "*.yaml", "*.yml"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert any(p.startswith("cluster_configs/") for p in listed) and any("examples/" in p for p in listed)
    for name in listed:
        assert isinstance(load_yaml(REPO / name), dict), name
