"""The harnesses in ``lab/`` stay runnable after moving there: each Python one answers ``--help`` (so its
imports resolve), each shell one parses and names modules that exist; one of them reproduces its committed
table from the committed data."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import REPO

LAB = REPO / "lab"


HARNESSES = sorted(p.stem for p in LAB.glob("*.py") if p.stem != "__init__")


def _help(name: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", f"lab.{name}", "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def helps():
    """Each harness's ``--help``, every one in a fresh interpreter of its own as before, started together on
    this machine's cores (the tests wait on their own)."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        yield {name: pool.submit(_help, name) for name in HARNESSES}


@pytest.mark.parametrize("name", HARNESSES)
def test_every_lab_harness_answers_help(name, helps):
    r = helps[name].result()
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage:")


@pytest.mark.parametrize("name", sorted(p.name for p in LAB.glob("*.sh")))
def test_every_lab_script_parses_and_names_modules_that_exist(name):
    assert subprocess.run(["bash", "-n", str(LAB / name)], capture_output=True).returncode == 0
    for package, module in re.findall(r"-m (benchmarks|lab)\.(\w+)", (LAB / name).read_text()):
        assert (REPO / package / f"{module}.py").is_file(), f"{name}: {package}.{module} does not exist"


def test_every_lab_harness_is_named_in_the_lab_readme_and_in_a_data_readme():
    readme = (LAB / "README.md").read_text()
    data_readmes = "\n".join(p.read_text() for p in (REPO / "data").rglob("*.md"))
    for path in sorted(LAB.glob("*.*")):
        if path.suffix not in (".py", ".sh") or path.stem == "__init__":
            continue
        assert f"`{path.name}`" in readme, f"lab/README.md does not list {path.name}"
        module = f"lab.{path.stem}" if path.suffix == ".py" else None
        assert f"lab/{path.name}" in data_readmes or (module and module in data_readmes), (
            f"no README under data/ names lab/{path.name}"
        )


def test_strategies_cfd_summary_reproduces_the_committed_table():
    runs = sorted(str(p) for p in (REPO / "data" / "cfd").glob("h*/strategies/runs.jsonl"))
    r = subprocess.run(
        [sys.executable, "-m", "lab.strategies_cfd_summary", *runs],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == (REPO / "data" / "cfd" / "combined" / "strategies_table.md").read_text()


def test_combined_variants_reproduces_its_committed_tables_from_its_committed_results():
    folder = REPO / "data" / "convolution" / "combined" / "variants"
    r = subprocess.run(
        [sys.executable, "-m", "lab.combined_variants", "--show", folder / "gbr.json", folder / "mlp.json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == (folder / "results.md").read_text()
