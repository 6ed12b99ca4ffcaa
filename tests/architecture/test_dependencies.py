"""Dependencies declared once and kept in step: every third-party import of the code is declared in
pyproject.toml, every declared package is imported (or says why not), and environment.yml lists exactly
pyproject.toml's dependencies and extras under their conda-forge names."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CODE = ("kernels", "pipeline", "benchmarks", "lab")
OWN = {"launchtune", "benchmarks", "lab", "tests"}

# an import name -> the requirement that brings it, where the two names differ
PROVIDED_BY = {
    "yaml": "pyyaml",
    "sklearn": "scikit-learn",
    "distributed": "dask",  # dask[distributed]
    "cupy": "cupy-cuda12x",
    "cupyx": "cupy-cuda12x",
    "cupy_backends": "cupy-cuda12x",
    "nvidia": "cupy-cuda12x",  # pip-installed CUDA libraries, tried where present (kernels/tridiag/gtsv2.py)
    "constraint": "kernel-tuner",  # python-constraint2, Kernel Tuner's own dependency for its restrictions
    "jupyter_client": "nbclient",  # nbclient's own dependency; its NoSuchKernel names a missing kernel
    "pynvml": "nvidia-ml-py",  # NVML's energy counter (kernels/energy.py)
}
# declared but never imported by name: what each one is for
NOT_IMPORTED = {
    "cryptography": "distributed's Security.temporary() needs it for the per-sweep TLS keys",
    "ipykernel": "the kernel the notebooks run in (pipeline notebooks, tests/notebooks)",
    "pytest": "the test runner",
    "hypothesis": "the property-based tests under tests/faults (tests are not scanned for imports)",
    "ruff": "the linter",
    "mypy": "the type checker",
    "pre-commit": "the commit hooks",
}
# pip name -> conda-forge names (dask[distributed] is two conda packages; CuPy has one package for all CUDAs)
CONDA_NAMES = {"dask[distributed]": ["dask", "distributed"], "cupy-cuda12x": ["cupy"]}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements() -> dict[str, list[str]]:
    """pyproject.toml's requirements as written, by group: "" for the dependencies, else the extra's name."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {"": project["dependencies"], **project["optional-dependencies"]}


def _split(requirement: str) -> tuple[str, str]:
    """``"dask[distributed]>=2024.8"`` -> (``"dask[distributed]"``, ``">=2024.8"``)."""
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+(?:\[[^\]]+\])?)\s*(.*)", requirement.strip())
    assert m, requirement
    return m[1], m[2].replace(" ", "")


def _declared() -> set[str]:
    return {_canonical(_split(r)[0].split("[")[0]) for reqs in _requirements().values() for r in reqs}


def _third_party_imports() -> dict[str, str]:
    """Each top-level module the code imports that is neither the standard library nor ours -> a file."""
    found: dict[str, str] = {}
    for pkg in CODE:
        for path in sorted((REPO / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in OWN:
                        found.setdefault(top, str(path.relative_to(REPO)))
    return found


def test_every_third_party_import_is_declared():
    declared = _declared()
    missing = {
        module: where
        for module, where in _third_party_imports().items()
        if _canonical(PROVIDED_BY.get(module, module)) not in declared
    }
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_every_declared_package_is_imported_or_says_why_not():
    imported = {_canonical(PROVIDED_BY.get(m, m)) for m in _third_party_imports()}
    unused = _declared() - imported - {_canonical(n) for n in NOT_IMPORTED}
    assert not unused, f"declared in pyproject.toml but never imported: {sorted(unused)}"


def _environment() -> dict[str, str]:
    """environment.yml's packages (conda and pip) -> their version specifier."""
    deps = yaml.safe_load((REPO / "environment.yml").read_text())["dependencies"]
    out: dict[str, str] = {}
    for dep in deps:
        for spec in dep["pip"] if isinstance(dep, dict) else [dep]:
            if spec.strip() == ".":  # launchtune itself (tests/packaging checks it is there)
                continue
            m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(.*)", spec.strip())
            assert m, spec
            assert _canonical(m[1]) not in out, f"environment.yml lists {m[1]} twice"
            out[_canonical(m[1])] = m[2].replace(" ", "")
    return out


def test_environment_yml_lists_pyprojects_dependencies_and_every_extra():
    expected: dict[str, str] = {}
    for group, reqs in _requirements().items():
        for requirement in reqs:
            name, spec = _split(requirement)
            for conda in CONDA_NAMES.get(name, [name]):
                key = _canonical(conda)
                assert expected.get(key, spec) == spec, f"pyproject.toml pins {name} two ways ({group})"
                expected[key] = spec
    env = _environment()
    assert {k: v for k, v in env.items() if k not in ("python", "pip")} == expected


def test_environment_yml_installs_launchtune_as_the_wheel_does():
    """conda's environment installs the checkout with pip, not editable, beside the conda packages."""
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip[-1] == "." and not any(re.match(r"-e\b|--editable", p) for p in pip)
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    required = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert tuple(map(int, python.split("=")[1].split("."))) >= tuple(
        map(int, required.lstrip(">=").split("."))
    )
