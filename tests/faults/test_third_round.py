"""Issue 43, third round: a sample of each kind of trial, as an attacker or a careless user would run them,
through the real command line. Each must end with one line naming the flag or file and what is wrong, exit
2, before any folder is made: never a traceback, never exit 0, never a hang, nothing written outside the
folder asked for. The kinds and what each checks are in docs/faults.md; this is the replay of a sample."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.kernel.conftest import SOURCE
from tests.kernel.conftest import base_spec as kernel_spec
from tests.pipeline.conftest import FAKE, REPO, base_spec, one_line_error, run_cli_here


def _kernel_sweep(d: Path, changes: dict | None = None, raw: str | None = None) -> list[str]:
    """A ``kernel`` sweep whose kernel spec is the test one with ``changes`` (or the ``raw`` text)."""
    (d / "scale.cu").write_text(SOURCE)
    spec = {**kernel_spec(), **(changes or {})}
    (d / "kernel.yaml").write_text(raw if raw is not None else yaml.safe_dump(spec, sort_keys=False))
    sweep = {"name": "mine", "workload": "kernel", "case": "scale", "size": "1000",
             "options": {"spec": "kernel.yaml"}, "samplers": ["exhaustive"], "samples": 0}  # fmt: skip
    (d / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    return ["sweep", str(d / "sweep.yaml"), "--out", str(d / "out")]


def _argument(index: int, **changes) -> dict:
    arguments = kernel_spec()["arguments"]
    arguments[index] = {**arguments[index], **changes}
    return {"arguments": arguments}


def _fake_sweep(d: Path, *flags: str, **spec) -> list[str]:
    (d / "spec.yaml").write_text(yaml.safe_dump(base_spec(**spec)))
    return ["sweep", str(d / "spec.yaml"), "--out", str(d / "out"), "--allow-workload", FAKE, *flags]


def _npy_of_objects(d: Path) -> dict:
    np.save(d / "in.npy", np.array([1, "x", None], dtype=object), allow_pickle=True)
    return _argument(1, fill={"npy": "in.npy"})


def _symlink(d: Path, name: str, target: str) -> Path:
    os.symlink(target, d / name)
    return d / name


TRIALS: dict[str, tuple[Callable[[Path], list[str]], str]] = {}  # name -> (the command, what its line says)


def trial(name: str, why: str) -> Callable:
    """Register ``make(folder) -> arguments`` as the trial ``name`` whose one line must hold ``why``."""

    def register(make: Callable[[Path], list[str]]) -> Callable[[Path], list[str]]:
        TRIALS[name] = (make, why)
        return make

    return register


# code from a spec expression, and a refusal that says what is allowed
trial("restriction max(a, key=b)", "keyword argument 'key' of max() is not allowed; the only calls are min(")(
    lambda d: _kernel_sweep(d, {"restrictions": ["max(block_size_x, key=tile) > 1"]})
)
trial("restriction __import__", "is not allowed; the only calls are min(a, b, ...)")(
    lambda d: _kernel_sweep(d, {"restrictions": ["__import__('os').system('true')"]})
)
# reads outside the spec's folder, files that are not files
trial("source: /etc/passwd", "source: '/etc/passwd' is outside the spec's folder")(
    lambda d: _kernel_sweep(d, {"source": "/etc/passwd"})
)


@trial("source: a symlink loop", "source: 'loop.cu' is not a usable path")
def _source_loop(d: Path) -> list[str]:
    _symlink(d, "loop.cu", "loop.cu")
    return _kernel_sweep(d, {"source": "loop.cu"})


@trial("kernel spec: a directory", "a directory where a kernel spec file belongs")
def _spec_dir(d: Path) -> list[str]:
    args = _kernel_sweep(d)
    (d / "kernel.yaml").unlink()
    (d / "kernel.yaml").mkdir()
    return args


trial("kernel spec: nested 24,000 deep", "nested deeper than 32 levels")(
    lambda d: _kernel_sweep(d, raw="a: " + "[" * 24000 + "]" * 24000)
)
# checked on the CPU before any cluster
trial("scalar 1/0", "arguments[2].value: '1/0'")(lambda d: _kernel_sweep(d, _argument(2, value="1/0")))
trial("scalar 2**40 into int32", "is not a int32 value")(
    lambda d: _kernel_sweep(d, _argument(2, value=2**40))
)
trial("uniform [nan, inf]", "arguments[1].fill.uniform: expected finite numbers")(
    lambda d: _kernel_sweep(d, _argument(1, fill={"uniform": [float("nan"), float("inf")]}))
)
trial("a .npy of objects", "arguments[1].fill.npy: in.npy holds object")(
    lambda d: _kernel_sweep(d, _npy_of_objects(d))
)
trial("shape 2**70", "arguments[1]:")(lambda d: _kernel_sweep(d, _argument(1, shape=[2**70])))
trial("grid divisor 0", "grid_div_x[0]: divisor '0'")(lambda d: _kernel_sweep(d, {"grid_div_x": ["0"]}))
# integers of thousands of digits, flags
trial("seed of 4,000 digits", "seed: at most 4,294,967,295")(lambda d: _fake_sweep(d, seed=int("9" * 4000)))
trial("size of 5,000 digits", "size: must be a positive size")(
    lambda d: _fake_sweep(d, size="9" * 5000 + "x4")
)
trial("--strategy ''", "--strategy: unknown strategy ''")(
    lambda d: _fake_sweep(d, "--strategy", "", "--budget", "5")
)
trial("--gpu-class ''", "--gpu-class: must be one or more names")(lambda d: _fake_sweep(d, "--gpu-class", ""))
trial("--gpu-class cpu,,cpu", "--gpu-class: must be one or more names")(
    lambda d: _fake_sweep(d, "--gpu-class", "cpu,,cpu")
)
trial("--budget 0", "--budget: must be")(lambda d: _fake_sweep(d, "--strategy", "evolve", "--budget", "0"))
trial("an unknown flag", "unrecognized arguments: --frobnicate")(lambda d: _fake_sweep(d, "--frobnicate"))
trial("--prior a symlink loop", "--prior: ")(
    lambda d: _fake_sweep(d, "--strategy", "transfer", "--budget", "5", "--prior", str(_symlink(d, "p", "p")))
)


@trial("--cluster a FIFO", "a FIFO where a cluster config belongs")
def _cluster_fifo(d: Path) -> list[str]:
    os.mkfifo(d / "c.yaml")
    return _fake_sweep(d, "--cluster", str(d / "c.yaml"))


trial("--cluster slurm, a class the spec names", "spec.yaml: gpu_classes: GPU class 'cpu' has no entry in")(
    lambda d: _fake_sweep(d, "--cluster", "slurm", gpu_classes=["cpu"])
)
trial("strategies --strategies ''", "--strategies: must be one or more names")(
    lambda d: ["strategies", "--dataset", str(d / "c.json"), "--compare", "--strategies", ""]
)
trial("cluster --gpu-class ''", "--gpu-class: must be one or more names")(
    lambda d: ["cluster", "--dry-run", "--gpu-class", ""]
)


# folders and records that are not what they should be
@trial("merge a file", "a file where a sweep folder (a folder) belongs")
def _merge_file(d: Path) -> list[str]:
    (d / "f").write_text("x")
    return ["merge", str(d / "f")]


trial("train a symlink loop", "cannot use it as a sweep folder")(
    lambda d: ["train", str(_symlink(d, "s", "s"))]
)


@trial("report a FIFO sweep.json", "a FIFO where a sweep description file belongs")
def _report_fifo(d: Path) -> list[str]:
    (d / "e").mkdir()
    os.mkfifo(d / "e" / "sweep.json")
    return ["report", str(d / "e")]


@trial("a cache with a key twice", "key 'tune_params_keys' twice in one object")
def _cache_twice(d: Path) -> list[str]:
    (d / "c.json").write_text('{"tune_params_keys": ["a"], "tune_params_keys": ["b"], "cache": {}}')
    return ["strategies", "--dataset", str(d / "c.json")]


@pytest.mark.parametrize("name", list(TRIALS))
def test_a_hostile_or_careless_input_is_one_line_exit_2_and_nothing_made(tmp_path, name):
    make, why = TRIALS[name]
    work = tmp_path / "work"
    work.mkdir()
    args = make(work)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    result = run_cli_here(*args, cwd=tmp_path, allow_fake=False, timeout=120)  # a hang fails at the timeout
    line = one_line_error(result)  # exit 2, one line, "error: "
    assert why in line, line
    assert "Traceback" not in result.stderr + result.stdout
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if not p.is_symlink() or p.exists())
    assert [p for p in after if p not in before] == []  # no folder made, no file written anywhere


CFD = [
    "-m",
    "launchtune.kernels.cfd",
    "run",
    "--size",
    "16x8",
    "--steps",
    "3",
    "--backend",
    "numpy",
    "--no-plot",
]
TRIDIAG = ["-m", "launchtune.kernels.tridiag", "solve"]
MODULE_TRIALS = {  # the solvers' own commands: the same rule
    "cfd --cfl inf (diverged, 18 lines, before)": ([*CFD, "--cfl", "inf"], "--cfl must be a positive finite"),
    "cfd --epsilon -1 (exit 0 before)": ([*CFD, "--epsilon", "-1"], "epsilon must lie in [0, 1], got -1.0"),
    "cfd --tuning-table without --autotune seeded (ignored before)": (
        [*CFD, "--tuning-table", "t.json"],
        "--tuning-table seeds the runtime tuner: it needs --autotune seeded",
    ),
    "cfd --tuning-table a directory ('no such file' before)": (
        [*CFD, "--autotune", "seeded", "--tuning-table", "."],
        "--tuning-table: .: a directory where a tuning table belongs",
    ),
    "cfd an unknown flag (argparse's usage before)": (
        [*CFD, "--frob"],
        "unrecognized arguments: --frob (see",
    ),
    "cfd --steps of 5,000 digits": (
        [*CFD, "--steps", "9" * 5000],
        "argument --steps: invalid int value: '9999",
    ),
    "tridiag without --size (eleven lines before)": (TRIDIAG, "the following arguments are required: --size"),
    "tridiag --size nan": ([*TRIDIAG, "--size", "nan"], "size 'nan' is not a number of unknowns"),
}


@pytest.mark.parametrize("name", list(MODULE_TRIALS))
def test_the_solvers_commands_refuse_in_one_line_too(tmp_path, name):
    args, why = MODULE_TRIALS[name]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    out = ["--out", str(tmp_path / "out")] if args[1].endswith("cfd") else []
    cmd = [sys.executable, *args, *out]
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    line = one_line_error(result)
    assert why in line and len(line) < 400, line
    assert not (tmp_path / "out").exists()
