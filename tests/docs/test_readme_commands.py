"""Every command block of the README, as a user pastes it on a fresh clone.

Each fenced ``bash`` block of README.md carries a marker comment on the line before it:

- ``<!-- readme-test: run -->``: the block is RUN as written, after ``source .venv/bin/activate``, in a copy
  of this working tree (tracked and unignored files, committed into a new git repository), one block after
  the other. Each must exit 0, and afterwards ``git status --porcelain`` of the copy must be empty: no tracked
  file changed, no unignored file or folder left behind.
- ``<!-- readme-test: check (why) -->``: the block needs what CI has not (a GPU, SLURM, root) or takes
  minutes, so it is NOT run. Each command in it is CHECKED instead: ``make`` targets and variables exist in
  the Makefile; ``launchtune``/``launchtune`` arguments parse with the real parser; other
  ``python -m MODULE [SUBCOMMAND]`` flags appear in that module's ``--help``; a ``bash`` script exists and
  uses the environment variables set for it; ``cp`` sources exist.

In both kinds, every argument that names a path under a tracked top-level folder (``data/``,
``cluster_configs/``, ``benchmarks/``, ...) must exist. A ``bash`` block without a marker fails the suite.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
_BLOCK = re.compile(
    r"(?:<!-- readme-test: (?P<kind>run|check)(?: \((?P<why>[^)]*)\))? -->\n)?```bash\n(?P<body>.*?)```", re.S
)
# top-level folders whose paths a command reads: they must exist (results/, runs/ are outputs)
_INPUT_ROOTS = ("data", "cluster_configs", "benchmarks", "notebooks", "kernels", "pipeline", "docs", "tests")
_VENV_BIN = Path(sys.executable).parent


def _blocks() -> list[tuple[str, str, str]]:
    """(kind, why, body) of every bash block, in README order; kind '' where the marker is missing."""
    text = README.read_text()
    return [(m["kind"] or "", m["why"] or "", m["body"]) for m in _BLOCK.finditer(text)]


def _commands(body: str) -> list[list[str]]:
    """Each command of a block as a user's shell splits it: continuations joined, comments dropped."""
    out = []
    for line in body.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words:
            out.append(words)
    return out


def _label(kind: str, body: str) -> str:
    first = _commands(body)[0]
    return f"{kind}: {' '.join(first)[:70]}"


BLOCKS = _blocks()
RUN = [b for b in BLOCKS if b[0] == "run"]
CHECK = [b for b in BLOCKS if b[0] == "check"]


def test_every_bash_block_says_whether_it_is_run_or_checked():
    unmarked = [body.splitlines()[0] for kind, _, body in BLOCKS if not kind]
    assert not unmarked, (
        f"README bash blocks without a <!-- readme-test: run|check (why) --> marker: {unmarked}"
    )
    assert all(why for kind, why, _ in BLOCKS if kind == "check"), (
        "a checked block must say why it is not run"
    )
    assert len(RUN) >= 5 and len(CHECK) >= 5  # the README has both kinds, and this test found them


# ---------------------------------------------------------------- checks shared by both kinds


def _paths_exist(words: list[str]) -> list[str]:
    """Arguments (or VAR=value / --flag=value values) naming a path under a tracked top-level folder that
    does not exist."""
    missing = []
    for word in words:
        value = word.split("=", 1)[1] if "=" in word else word
        if value.split("/", 1)[0] in _INPUT_ROOTS and "/" in value:
            if not (ROOT / value).exists():
                missing.append(value)
    return missing


def _makefile() -> tuple[set[str], set[str]]:
    text = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w.-]+):(?!=)", text, re.M))
    variables = set(re.findall(r"^([A-Z_]+)\s*[?:]?=", text, re.M))
    return targets, variables


def _split_env(words: list[str]) -> tuple[dict[str, str], list[str]]:
    env = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        key, value = words[0].split("=", 1)
        env[key] = value
        words = words[1:]
    if words and words[0] == "sudo":
        return _split_env(words[1:])
    return env, words


def _help(module: str, args: list[str]) -> str:
    """``python -m module [subcommand] --help`` of this tree."""
    sub = [args[0]] if args and not args[0].startswith("-") else []
    result = subprocess.run(
        [sys.executable, "-m", module, *sub, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert result.returncode == 0, f"python -m {module} {' '.join(sub)} --help: {result.stderr[-2000:]}"
    return result.stdout


def _check_command(words: list[str]) -> None:
    """The checks of one command of a checked block (module docstring); raises AssertionError naming it."""
    env, words = _split_env(words)
    shown = " ".join(words)
    assert not _paths_exist(words) and not _paths_exist([f"={v}" for v in env.values()]), (
        f"{shown}: no such path {_paths_exist(words) + _paths_exist([f'={v}' for v in env.values()])}"
    )
    program, args = words[0], words[1:]
    if program == "make":
        targets, variables = _makefile()
        for arg in args:
            if "=" in arg:
                assert arg.split("=", 1)[0] in variables, f"{shown}: the Makefile has no variable {arg}"
            else:
                assert arg in targets, f"{shown}: the Makefile has no target {arg}"
        for key in env:
            assert key in variables or key == "CUDA_VISIBLE_DEVICES", f"{shown}: {key} means nothing to make"
    elif program == "launchtune" or program == "python" and args[:2] == ["-m", "launchtune"]:
        from launchtune.pipeline.cli import build_parser

        argv = args if program == "launchtune" else args[2:]
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:  # argparse's way of refusing; it printed why
            raise AssertionError(f"{shown}: the arguments do not parse") from exc
    elif program == "python" and args[:1] == ["-m"]:
        module, rest = args[1], args[2:]
        text = _help(module, rest)
        for flag in (w.split("=", 1)[0] for w in rest if w.startswith("--")):
            assert re.search(rf"{re.escape(flag)}\b", text), f"{shown}: {flag} is not in {module}'s --help"
    elif program == "bash":
        script = ROOT / args[0]
        assert script.is_file(), f"{shown}: no script {args[0]}"
        body = script.read_text()
        for key in env:
            assert re.search(rf"\${{?{key}\b", body), f"{shown}: {args[0]} never reads {key}"
    elif program == "cp":
        assert (ROOT / args[0]).exists(), f"{shown}: no file {args[0]}"
    else:
        raise AssertionError(f"{shown}: this test does not know how to check {program!r}; teach it")


@pytest.mark.parametrize("block", CHECK, ids=[_label(k, b) for k, _, b in CHECK])
def test_a_checked_block_names_real_commands_flags_and_paths(block):
    for words in _commands(block[2]):
        _check_command(words)


def test_the_checks_catch_a_stale_flag_path_target_and_variable():
    """The checks can fail: each kind of staleness the test exists for is caught."""
    stale = [
        "launchtune sweep cluster_configs/sweeps/default.yaml --no-such-flag",
        "launchtune streams --dataset data/tridiag/h100/streams.csv",
        "make no-such-target",
        "make sweep NO_SUCH_VAR=1",
        "python -m launchtune.kernels.cfd run --case inlet --no-such-flag 1 --out runs/x",
        "CPU=1 bash benchmarks/no_such_script.sh",
        "python3 something.py",
    ]
    for command in stale:
        with pytest.raises(AssertionError):
            _check_command(shlex.split(command))


# ---------------------------------------------------------------- the run blocks, on a copy


def _copy_of_this_tree(dest: Path) -> Path:
    """Tracked and unignored files of this working tree, committed into a new repository at ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        rel = raw.decode()
        src = ROOT / rel
        if src.is_file():  # a tracked file deleted in the working tree is not copied
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run([*git, "add", "-A"], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-qm", "copy"], cwd=dest, check=True)
    # the environment the README's "source .venv/bin/activate" needs: this interpreter's venv, linked in
    (dest / ".venv").symlink_to(_VENV_BIN.parent)
    with (dest / ".git" / "info" / "exclude").open("a") as fh:
        fh.write(".venv\n")  # the link is not a folder, so .gitignore's ".venv/" does not cover it
    return dest


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict:
    """Every run block, in README order, in one copy of the tree; their results and the final status."""
    if not (_VENV_BIN / "launchtune").exists():
        pytest.fail(f"{_VENV_BIN / 'launchtune'} missing: reinstall the project (pip install -e .)")
    copy = _copy_of_this_tree(tmp_path_factory.mktemp("fresh_clone"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHTUNE_", "VIRTUAL_ENV"))}
    env.update(PYTHONPATH=str(copy), MPLBACKEND="Agg")  # the copy's code, as a fresh clone's install
    results = {}
    for _, _, body in RUN:
        script = "set -euo pipefail\nsource .venv/bin/activate\n" + body
        proc = subprocess.run(
            ["bash", "-c", script], cwd=copy, env=env, capture_output=True, text=True, timeout=900
        )
        results[body] = proc
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=copy,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {"results": results, "status": status, "copy": copy}


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN, ids=[_label(k, b) for k, _, b in RUN])
def test_a_run_block_works_as_written_on_a_fresh_copy(ran, block):
    body = block[2]
    for words in _commands(body):
        assert not _paths_exist(_split_env(words)[1]), f"{' '.join(words)}: no such path"
    proc = ran["results"][body]
    assert proc.returncode == 0, (
        f"{body}\nexit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    )


@pytest.mark.slow
def test_the_run_blocks_leave_the_repository_clean(ran):
    assert ran["status"] == "", f"after the README's commands, git status shows:\n{ran['status']}"
    assert (ran["copy"] / "results").is_dir()  # they did write, where git ignores it
