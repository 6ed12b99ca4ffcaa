"""The shape of the house, checked from the source: imports form no cycle, ``kernels`` never
imports ``pipeline``, and every module imports on its own in a fresh interpreter."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "launchtune"  # the one installed package: launchtune/ with kernels/ and pipeline/ linked in


def _modules() -> dict[str, Path]:
    """Every module of the installed package by its dotted name (``launchtune.kernels.space``)."""
    out = {}
    paths = [
        Path(d, f) for d, _, fs in os.walk(REPO / PACKAGE, followlinks=True) for f in fs if f.endswith(".py")
    ]
    for path in sorted(paths):  # through the links to kernels/ and pipeline/
        parts = (PACKAGE, *path.relative_to(REPO / PACKAGE).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def test_the_package_sees_every_module():
    names = _modules()
    for layer in ("kernels", "pipeline"):
        files = list((REPO / layer).rglob("*.py"))
        assert len([n for n in names if n.startswith(f"{PACKAGE}.{layer}")]) == len(files) > 10


def _resolve(module: str, names: dict[str, Path]) -> str | None:
    """The project module an import names: itself, or its package for ``from package import name``."""
    while module and module not in names:
        module = module.rpartition(".")[0]
    return module or None


def imported_from(node: ast.ImportFrom, module: str, path: Path) -> str:
    """The absolute module a ``from ... import`` names; a relative one (``from ..kernels.space``) resolved
    from the importing module's own package, as Python does."""
    if not node.level:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return importlib.util.resolve_name("." * node.level + (node.module or ""), package)


def test_relative_imports_resolve_from_the_importing_module():
    def first(source: str, module: str, path: str) -> str:
        node = ast.parse(source).body[0]
        assert isinstance(node, ast.ImportFrom)
        return imported_from(node, module, Path(path))

    assert first("from ...kernels.space import Space", "launchtune.pipeline.sweep.run", "run.py") == (
        "launchtune.kernels.space"
    )
    assert first("from .. import autotune", "launchtune.kernels.cfd", "__init__.py") == "launchtune.kernels"
    assert first("from launchtune.kernels import space", "x.y", "y.py") == "launchtune.kernels"


def project_imports() -> dict[str, set[str]]:
    """Project modules each module imports, at module level or inside a function (a cycle hidden in a
    function is still a cycle: the two modules cannot be understood or moved apart)."""
    names = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                targets = [f"{imported_from(node, name, path)}.{a.name}" for a in node.names]
            for t in targets:
                dep = _resolve(t, names)
                if dep and dep != name and not name.startswith(dep + "."):  # a package's own __init__ is fine
                    deps.add(dep)
        graph[name] = deps
    return graph


def test_no_import_cycle():
    try:
        list(TopologicalSorter(project_imports()).static_order())
    except CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def test_kernels_never_import_pipeline():
    names = _modules()
    for name, path in names.items():
        if not name.startswith("launchtune.kernels"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):  # function-level imports too
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [imported_from(node, name, path)]
            bad = [m for m in mods if m.startswith(("launchtune.pipeline", "launchtune.api"))]
            assert not bad, f"{path} imports {bad}"


def test_every_module_imports_alone():
    # `__main__` modules run their CLI when imported, so they are left out. One fresh interpreter per module
    # would take minutes; one interpreter that imports each module after
    # clearing the project's modules from sys.modules gives the same check (nothing imported before helps).
    modules = sorted(n for n in _modules() if not n.endswith("__main__"))  # those run their CLI when imported
    code = f"""
import importlib, sys
failed = []
for name in {modules!r}:
    for m in [m for m in sys.modules if m.split('.')[0] == {PACKAGE!r}]:
        del sys.modules[m]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{{name}}: {{type(exc).__name__}}: {{exc}}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# The folders of pipeline/, lowest first: a module imports only from folders below its own (and its own
# folder, and pipeline's top-level modules: errors, paths, jsonio, records, ...). ``cli`` sits on top.
PIPELINE_LAYERS = (
    ("store", "cluster", "streams"),  # the sweep folder's format; Dask clusters; the streams model
    ("learn",),  # surrogate models
    ("strategies",),  # search strategies
    ("results",),  # reading results back: report, figures, tables
    ("sweep",),  # running a whole sweep: plan, measure, merge, train, report
    ("commands",),  # one module per CLI command
)


def _layer(module: str) -> int | None:
    """A pipeline module's layer (its folder's index in PIPELINE_LAYERS); None for a top-level module."""
    parts = module.split(".")
    if parts[:2] != ["launchtune", "pipeline"] or len(parts) < 4:
        return None if parts[-1] != "cli" else len(PIPELINE_LAYERS)
    return next(i for i, folders in enumerate(PIPELINE_LAYERS) if parts[2] in folders)


def test_pipeline_folders_import_only_downwards():
    known = {f for folders in PIPELINE_LAYERS for f in folders}
    present = {p.name for p in (REPO / "pipeline").iterdir() if (p / "__init__.py").exists()}
    assert present == known, f"pipeline folders not placed in PIPELINE_LAYERS: {present ^ known}"
    wrong = []
    for module, deps in project_imports().items():
        if not module.startswith("launchtune.pipeline"):
            continue
        mine = _layer(module)
        for dep in deps:
            theirs = _layer(dep)
            if theirs is None or dep.split(".")[2] == module.split(".")[2]:
                continue  # a top-level module (errors, paths...) or the same folder
            if mine is None or theirs >= mine:
                wrong.append(f"{module} -> {dep}")
    assert not wrong, "imports up or across the layers:\n" + "\n".join(sorted(wrong))


def test_the_pipeline_asks_workloads_what_they_declare():
    """No probing a workload for a method, and no test of a workload's name outside the registries."""
    probes = []
    for path in sorted((REPO / "pipeline").rglob("*.py")):
        text = path.read_text()
        for needle in (
            "hasattr(workload",
            "hasattr(session.workload",
            "getattr(workload",
            '== "kernel"',
            '!= "kernel"',
        ):
            if needle in text:
                probes.append(f"{path.relative_to(REPO)}: {needle}")
    assert not probes, probes
