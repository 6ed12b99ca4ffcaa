"""The wheel works outside the repository: built from the package folders alone, installed into a fresh
virtual environment in a temporary folder together with the package index's ``kernels`` (Hugging Face's)
and ``pipeline`` (another project's), the two names the project once installed at the top level, and run
from that folder with nothing of the checkout on the path: ``--version``, a CPU sweep of the shipped default
spec by its name, the shipped examples listed and one copied, the shipped SLURM config's dry run, the
notebooks command on the sweep it made, the tridiagonal host solver (its C source
is package data, compiled on first use), and ``import kernels`` finds theirs.

This is the CI step of issue 39; it needs the package index (the wheel's build requirements, ``kernels`` and
``pipeline`` with their dependencies) and takes minutes (the sweep most of them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# What the wheel is built from: the package (its links) and the folders they link to, and what
# pyproject.toml names (the README is the long description). Built from a copy, so the build's build/ and
# *.egg-info never land in the checkout, and a file outside these folders cannot leak into the wheel.
SOURCES = ("pyproject.toml", "README.md", "launchtune", "kernels", "pipeline", "cluster_configs", "notebooks")
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]

pytestmark = pytest.mark.slow


def _run(cmd: list[str | Path], cwd: Path, env: dict[str, str], timeout: float = 900) -> str:
    done = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, (
        f"{cmd} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("wheel")
    assert not root.resolve().is_relative_to(REPO.resolve())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["LAUNCHTUNE_RESULTS"] = str(root / "results")

    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, src / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", root / "dist", src], root, env)
    (wheel,) = (root / "dist").glob("launchtune-*.whl")

    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], root, env)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q"]
    _run([*pip, "--no-deps", wheel], root, env)
    # launchtune's own dependencies (Dask, scikit-learn, pyarrow, pandas, matplotlib, ...) come from the
    # environment running this test through a .pth line: installing them afresh takes many minutes, and the
    # test is about what the wheel holds, not about the index's builds of them. A .pth line adds the folder
    # to sys.path only (its own .pth files, such as an editable install's hook, are not run), after the new
    # environment's site-packages, so the wheel's launchtune is the one imported and found by version().
    site = Path(
        _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root, env).strip()
    )
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "zz_launchtune_test_dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    # the index's packages of the names we used to install (with their own dependencies)
    _run([*pip, "kernels", "pipeline"], root, env)

    work = root / "work"
    work.mkdir()
    return {"root": root, "work": work, "env": env, "bin": venv / "bin", "site": site, "wheel": wheel}


def test_the_wheel_holds_one_package_and_its_data(installed):
    names = zipfile.ZipFile(installed["wheel"]).namelist()
    assert {n.split("/")[0] for n in names} == {"launchtune", f"launchtune-{VERSION}.dist-info"}
    for data in (
        "launchtune/kernels/cfd/solver.cu",
        "launchtune/kernels/tridiag/host_thomas.c",
        "launchtune/kernels/examples/convolution.yaml",
        "launchtune/cluster_configs/slurm.yaml",
        "launchtune/cluster_configs/sweeps/default.yaml",
        "launchtune/notebooks/01_sweep_overview.ipynb",
    ):
        assert data in names


def test_version(installed):
    out = _run([installed["bin"] / "launchtune", "--version"], installed["work"], installed["env"])
    assert out == f"launchtune {VERSION}\n"


@pytest.fixture(scope="module")
def default_sweep(installed) -> tuple[Path, str]:
    """``launchtune sweep default --samples 20``: the shipped spec by name, from a folder outside the
    repository (no GPU here: the local cluster runs one CPU worker, and `auto` picks the numpy backend)."""
    work, env = installed["work"], installed["env"]
    out = work / "results" / "default"
    lines = _run(
        [installed["bin"] / "launchtune", "sweep", "default", "--samples", "20", "--out", out], work, env
    )
    return out, lines


def test_a_cpu_sweep_of_the_shipped_default_spec_by_name(installed, default_sweep):
    out, lines = default_sweep
    assert "measured 20 configurations" in lines and f"report: {out / 'report.md'}" in lines
    assert (out / "tuning_table.json").is_file() and len(list((out / "merged").rglob("*.parquet"))) >= 1
    spec = installed["site"] / "launchtune" / "cluster_configs" / "sweeps" / "default.yaml"
    assert str(spec) in (out / "sweep.json").read_text()  # the wheel's own spec, found by its name


def test_the_shipped_examples_are_listed_and_copied(installed):
    work, env, launchtune = installed["work"], installed["env"], installed["bin"] / "launchtune"
    listing = _run([launchtune, "examples"], work, env)
    assert "  default " in listing and "  convolution " in listing and "  heat " in listing
    _run([launchtune, "examples", "convolution", "my_conv"], work, env)
    copied = sorted(p.name for p in (work / "my_conv").iterdir())
    assert copied == ["README.md", "convolution.cu", "convolution.yaml", "kernel_convolution.yaml"]
    assert "launchtune sweep my_conv/kernel_convolution.yaml" in (work / "my_conv" / "README.md").read_text()
    # the copied sweep spec names the copied kernel spec beside it, not the wheel's
    python = installed["bin"] / "python"
    check = (
        "from launchtune.pipeline.store.spec import load_spec; "
        "print(load_spec('my_conv/kernel_convolution.yaml').options['spec'])"
    )
    assert _run([python, "-c", check], work, env).strip() == str(work / "my_conv" / "convolution.yaml")


def test_the_shipped_slurm_config_dry_run(installed):
    out = _run(
        [installed["bin"] / "launchtune", "cluster", "--dry-run", "slurm"],
        installed["work"],
        installed["env"],
    )
    assert out.startswith(f"{installed['site'] / 'launchtune' / 'cluster_configs' / 'slurm.yaml'}: ")
    assert "#SBATCH" in out


def test_the_notebooks_command_on_the_sweep_it_made(installed, default_sweep):
    work, launchtune = installed["work"], installed["bin"] / "launchtune"
    # nbconvert's HTML templates are data files of the environment running this test (its share/jupyter),
    # which the .pth line above does not reach; `pip install 'launchtune[notebooks]'` puts them in the
    # environment's own share/jupyter
    env = {**installed["env"], "JUPYTER_PATH": str(Path(sys.prefix) / "share" / "jupyter")}
    out, _ = default_sweep
    lines = _run([launchtune, "notebooks", "01", "--results", out.parent, "--out", work / "nb"], work, env)
    assert "01_sweep_overview.ipynb: ok in" in lines
    assert (work / "nb" / "01_sweep_overview.html").is_file()
    # with no --results and no checkout's data/, one line saying what to name
    done = subprocess.run(
        [str(launchtune), "notebooks", "01"], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: no results folder named: give --results DIR")
    assert done.stderr.count("\n") == 1


def test_the_tridiagonal_host_solver_builds_from_the_wheels_source(installed):
    script = """
import numpy as np
from scipy.linalg import solve_banded
from launchtune.kernels.tridiag import host_solver

n = 1000
rng = np.random.default_rng(0)
iface = np.empty((4, n))
iface[0], iface[2], iface[3] = rng.uniform(-1, 1, (3, n))
iface[1] = 4 + rng.uniform(0, 1, n)  # diagonally dominant
iface[0, 0] = iface[2, -1] = 0.0
bands = np.array([np.r_[0, iface[2, :-1]], iface[1], np.r_[iface[0, 1:], 0]])
want = solve_banded((1, 1), bands, iface[3].copy())
solver = host_solver.HostSolver(n, threads=2)
got = solver.solve(iface)
print(solver.name, float(np.max(np.abs(got - want))))
"""
    env = {**installed["env"], "XDG_CACHE_HOME": str(installed["root"] / "cache")}  # compiled afresh there
    out = _run([installed["bin"] / "python", "-c", script], installed["work"], env)
    name, error = out.split()
    assert name == "thomas-omp" and float(error) < 1e-12  # compiled from the wheel's host_thomas.c
    built = list((installed["root"] / "cache" / "launchtune").glob("host_thomas_*.so"))
    assert len(built) == 1


def test_import_kernels_is_not_ours(installed):
    script = "import kernels, launchtune, pipeline; print(kernels.__file__); print(pipeline.__file__)"
    out = _run([installed["bin"] / "python", "-c", script], installed["work"], installed["env"])
    site = installed["site"]
    assert out.split() == [str(site / "kernels" / "__init__.py"), str(site / "pipeline" / "__init__.py")]
    assert "launchtune" not in (site / "kernels" / "__init__.py").read_text()
    # and launchtune still works beside them
    version = _run([installed["bin"] / "launchtune", "--version"], installed["work"], installed["env"])
    assert version == f"launchtune {VERSION}\n"
