"""A workload is registered in one place (``pipeline/store/workloads.py``'s ``REGISTERED``), under its own
name, and the spec checker looks it up once, then asks its class."""

from __future__ import annotations

import ast
import re

from launchtune.kernels.workload import Workload
from launchtune.pipeline.store import spec as spec_module
from launchtune.pipeline.store import workloads
from tests.architecture.test_imports import REPO, _modules

REGISTRY = REPO / "pipeline" / "store" / "workloads.py"
_TARGET = re.compile(r"launchtune(\.\w+)+:\w+")


def _trees() -> dict[str, ast.Module]:
    """Every product module (through the package's links) by dotted name."""
    return {name: ast.parse(path.read_text()) for name, path in _modules().items()}


def _buildable() -> set[str]:
    """``module:Class`` of every ``Workload`` subclass defined beside a ``make_workload`` factory: what a
    worker could build by name, so what must be registered."""
    found = set()
    for name, tree in _trees().items():
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        for node in tree.body:
            bases = {b.id for b in getattr(node, "bases", []) if isinstance(b, ast.Name)}
            if isinstance(node, ast.ClassDef) and "Workload" in bases and "make_workload" in functions:
                found.add(f"{name}:{node.name}")
    return found


def test_every_buildable_workload_is_registered_under_its_own_name():
    buildable = _buildable()
    assert len(buildable) >= 4  # cfd, tridiag, kernel, replay: the scan sees them
    assert sorted(workloads.REGISTERED.values()) == sorted(buildable)
    for name in workloads.REGISTERED:
        cls = workloads.workload_class(name)
        assert cls is not None and issubclass(cls, Workload) and cls.name == name


def test_registration_happens_in_the_registry_only():
    """No other product module names a workload's class or factory as ``module:attr`` (a second registry)."""
    modules = {target.partition(":")[0] for target in workloads.REGISTERED.values()}
    elsewhere = []
    for name, path in _modules().items():
        if path.resolve() == REGISTRY.resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for match in _TARGET.finditer(node.value):
                    if match.group(0).partition(":")[0] in modules:
                        elsewhere.append(f"{name}: {match.group(0)}")
    assert not elsewhere, elsewhere


def test_the_spec_checker_looks_the_workload_up_once(monkeypatch):
    calls = []

    def lookup(name, where="workload"):
        calls.append(name)
        return workloads.workload_class(name, where)

    monkeypatch.setattr(spec_module, "workload_class", lookup)
    spec_module.parse_spec({"name": "t", "workload": "tridiag", "case": "random", "size": 1000}, "t.yaml")
    assert calls == ["tridiag"]
