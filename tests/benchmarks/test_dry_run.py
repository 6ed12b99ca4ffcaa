"""Every GPU benchmark as far as a CPU can take it: each ``benchmarks/*_gpu.sh`` run as committed with
``DRY_RUN=1``, where each step parses its arguments, writes the specs and files it would measure with, checks
them with the project's own loaders and stops (``--dry-run``; ``benchmarks/gpu_setup.sh``). A change to the
project that makes it refuse what a benchmark writes fails here, not on the lent GPU.

Each ``*_gpu.sh`` declares in its header how a CPU runs it: ``# Dry run: DRY_RUN=1 (WHAT IT CHECKS)``, or
``# Dry run: none (WHY)`` where nothing of it runs without its machine. A new script without the line fails
``test_every_gpu_script_declares_its_dry_run``. And every benchmark module ends in ``run_main(main)``: a user
mistake is one line and exit 2."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import REPO

BENCH = REPO / "benchmarks"
GPU_SCRIPTS = sorted(p.name for p in BENCH.glob("*_gpu.sh"))
DECLARED = re.compile(r"^# Dry run: (DRY_RUN=1|none) \((.+)\)$", re.M)
DRY = [s for s in GPU_SCRIPTS if (m := DECLARED.search((BENCH / s).read_text())) and m[1] == "DRY_RUN=1"]
MODULES = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__")


def _shim(work: Path) -> Path:
    """A folder whose ``python3`` is this interpreter (the scripts call ``python3``)."""
    bin_dir = work / "bin"
    bin_dir.mkdir(parents=True)
    shim = bin_dir / "python3"  # a script, not a link: a link out of the venv's folder loses the venv
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    shim.chmod(0o755)
    return bin_dir


def _dry_run(script: str, work: Path) -> tuple[int, str]:
    """``DRY_RUN=1 bash benchmarks/SCRIPT`` with its work folders under ``work`` (``TMPDIR``) and ``python3``
    this interpreter; its exit code and everything it printed or logged (stdout, stderr, ``$OUT``'s logs)."""
    env = {**os.environ, "DRY_RUN": "1", "OUT": str(work / "out"), "TMPDIR": str(work)}
    env["PATH"] = f"{_shim(work)}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    r = subprocess.run(
        ["bash", f"benchmarks/{script}"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    logs = [
        p.read_text(errors="replace")
        for p in sorted((work / "out").rglob("*"))
        if p.suffix in (".log", ".txt")
    ]
    return r.returncode, "\n".join([r.stdout, r.stderr, *logs])


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory):
    """Every declared dry run, started together on this machine's cores (the tests wait on their own)."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        yield {s: pool.submit(_dry_run, s, tmp_path_factory.mktemp(s.removesuffix(".sh"))) for s in DRY}


@pytest.mark.parametrize("script", GPU_SCRIPTS)
def test_every_gpu_script_declares_its_dry_run(script):
    text = (BENCH / script).read_text()
    assert DECLARED.search(text), (
        f"{script}: no '# Dry run: DRY_RUN=1 (what it checks)' or '# Dry run: none (why)' line in its header "
        "(tests/benchmarks/test_dry_run.py)"
    )
    if DECLARED.search(text)[1] == "DRY_RUN=1":
        assert "source benchmarks/gpu_setup.sh" in text, f"{script}: DRY_RUN=1 is set up by gpu_setup.sh"


def test_the_smoke_driver_sets_only_what_each_script_reads():
    """``all_gpu_smoke.sh``'s short settings: each for a script that exists, each variable one it reads."""
    text = (BENCH / "all_gpu_smoke.sh").read_text()
    settings = re.findall(r"^    (\S+\.sh)\) echo \"([^\"]*)\" ;;$", text, re.M)
    assert settings, 'all_gpu_smoke.sh: no settings found (the test reads `name.sh) echo "VAR=x ..." ;;`)'
    for script, assignments in settings:
        assert script in DRY, f"all_gpu_smoke.sh: settings for {script}, not a one-GPU script with a dry run"
        body = (BENCH / script).read_text()
        for name in (a.split("=", 1)[0] for a in assignments.split()):
            assert re.search(rf"\${{{name}\b", body), f"all_gpu_smoke.sh: {script} never reads {name}"


def test_the_smoke_driver_runs_scripts_and_tables_their_exit_codes(tmp_path):
    """Dry, on two scripts and a name that is none: the settings reach the script, the table says each."""
    env = {**os.environ, "DRY_RUN": "1", "OUT": str(tmp_path / "out"), "TMPDIR": str(tmp_path)}
    env["PATH"] = f"{_shim(tmp_path)}{os.pathsep}{env.get('PATH', '')}"
    r = subprocess.run(
        ["bash", "benchmarks/all_gpu_smoke.sh", "objective_energy_gpu.sh", "no_such_gpu.sh"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    ran, missing = r.stdout.splitlines()[-2:]
    assert re.fullmatch(r"\| objective_energy_gpu\.sh \| 0 \| \d+ \|", ran), r.stdout
    assert missing == "| no_such_gpu.sh | no such script |  |"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["smoke.log", "smoke.tar.gz", "table.txt"]
    log = (tmp_path / "out" / "smoke.log").read_text()
    assert "12 configurations to measure" in log  # SAMPLES=12 reached energy_convolution


@pytest.mark.parametrize("script", DRY)
def test_a_gpu_script_runs_dry_and_checks_every_step(script, dry_runs):
    """Exit 0, no traceback, and each benchmark module the script runs said it checked its part."""
    code, text = dry_runs[script].result()
    assert code == 0 and "Traceback" not in text, text[-4000:]
    for module in sorted(set(re.findall(r"-m (benchmarks\.\w+)", (BENCH / script).read_text()))):
        assert f"dry run: {module}:" in text, f"{script}: {module} did not run dry\n{text[-3000:]}"


def test_a_spec_the_project_refuses_is_one_line_and_exit_2(tmp_path):
    """What ``objective_energy_gpu.sh`` once wrote: a kernel spec whose ``source:`` lies outside its folder.
    The benchmark says so in one line (``run_main``), exit 2, where it was a traceback."""
    examples = REPO / "kernels" / "examples"
    kernel = tmp_path / "convolution.yaml"
    kernel.write_text(
        (examples / "convolution.yaml")
        .read_text()
        .replace("source: convolution.cu", f"source: {examples / 'convolution.cu'}")
    )
    sweep = (REPO / "cluster_configs" / "sweeps" / "kernel_convolution.yaml").read_text()
    (tmp_path / "sweep.yaml").write_text(re.sub(r"spec: \S+", f"spec: {kernel.name}", sweep, count=1))
    r = subprocess.run(
        [sys.executable, "-m", "benchmarks.live_search", "--spec", str(tmp_path / "sweep.yaml"), "--dry-run"]
        + ["--out", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2, r.stderr[-3000:]
    (line,) = r.stderr.splitlines()
    assert line.startswith("error: ") and "keep it beside the spec" in line, line


def _ends_in_run_main(path: Path) -> bool:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return ast.unparse(node.body[0]).strip() == "run_main(main)" and len(node.body) == 1
    return False


@pytest.mark.parametrize("name", MODULES)
def test_every_benchmark_module_ends_in_run_main(name):
    assert _ends_in_run_main(BENCH / f"{name}.py"), (
        f'benchmarks/{name}.py: end it in `if __name__ == "__main__":\\n    run_main(main)` '
        "(from benchmarks import run_main): a user mistake is then one line and exit 2"
    )


def test_run_main_turns_a_user_error_into_one_line_and_exit_2(capsys):
    from benchmarks import run_main
    from launchtune.pipeline.errors import UserError

    def mistake() -> int:
        raise UserError("spec.yaml: size: not a size")

    def bug() -> int:
        raise KeyError("a bug keeps its traceback")

    with pytest.raises(SystemExit) as exc:
        run_main(mistake)
    assert exc.value.code == 2 and capsys.readouterr().err == "error: spec.yaml: size: not a size\n"
    with pytest.raises(SystemExit) as exc:
        run_main(lambda: 3)
    assert exc.value.code == 3
    with pytest.raises(KeyError):
        run_main(bug)
