"""Every command a data folder's README gives (``data/**/README.md``: its fenced ``bash`` blocks and its
inline code) still names a script, module, flag and path of this tree, checked as the README's checked blocks
are (``tests/docs/test_readme_commands.py``: a module's flags in its ``--help``, ``launchtune`` arguments
parsed by the real parser, a script's variables read by it). They are not run: they need a GPU and minutes.

A command that ran on an earlier tree whose script or flag is gone stays as it ran (provenance), with the line
``<!-- data-command: earlier tree (WHY) -->`` right before its block, paragraph or list item: not checked.
A ``launchtune COMMAND --flag`` in prose (inline code) names a command and flags that must exist."""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import shlex
import sys
import warnings
from functools import cache

import pytest

from tests.conftest import REPO
from tests.docs import test_readme_commands as readme

READMES = sorted(REPO.glob("data/**/README.md"))
# a command: optional VAR=value words, then one of the programs a data folder reruns
PROGRAM = (
    r"(?:[A-Z_][A-Z0-9_]*=\S*\s+)*"
    r"(?:python3? -m (?:benchmarks|lab|launchtune|kernels|tools)\b|launchtune |bash (?:benchmarks|lab)/)"
)
_EARLIER = re.compile(
    r"<!-- data-command: earlier tree \([^)]+\) -->\n(?:```bash\n.*?```|.*?(?=\n\n|\n- |$))", re.S
)
_BLOCK = re.compile(r"```bash\n(?P<body>.*?)```", re.S)
_INLINE = re.compile(r"(?<!`)`(" + PROGRAM + r"[^`]*)`(?!`)")


def _commands(text: str) -> list[list[str]]:
    """Each command of the file as a shell splits it: block lines (continuations joined, comments dropped,
    blocks marked as an earlier tree's left out) and inline spans that start with a known program."""
    out = []
    text = _EARLIER.sub("", text)
    for m in _BLOCK.finditer(text):
        out += [w for w in readme._commands(m["body"]) if re.match(PROGRAM, shlex.join(w))]
    prose = _BLOCK.sub("", text)
    for span in _INLINE.findall(prose.replace("\n", " ")):
        words = shlex.split(span, comments=True)
        out.append(["PROSE", *words] if words[0] == "launchtune" else words)
    return out


@cache
def _help(module: str, sub: str | None) -> str:
    """``python -m module [sub] --help``, in this process (one import of the project for every module, where
    a fresh interpreter each costs seconds); the text it printed."""
    out = io.StringIO()
    argv = sys.argv
    sys.argv = [f"{module.rsplit('.', 1)[-1]}.py", *([sub] if sub else []), "--help"]
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(io.StringIO()),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore", RuntimeWarning)  # runpy: a module imported before, run again
            runpy.run_module(module, run_name="__main__", alter_sys=False)
    except SystemExit as exc:
        assert exc.code in (0, None), f"python -m {module} --help: exit {exc.code}"
    except ImportError as exc:
        raise AssertionError(f"python -m {module}: {exc}") from None
    finally:
        sys.argv = argv
    return out.getvalue()


def _read_by(script: str) -> str:
    """A script's text and that of the modules it runs (an environment variable passes through to them)."""
    body = (REPO / script).read_text()
    modules = re.findall(r"-m ((?:benchmarks|lab)\.\w+)", body)
    return body + "".join((REPO / (m.replace(".", "/") + ".py")).read_text() for m in modules)


def _check(words: list[str]) -> None:
    """``readme._check_command``, with ``python3`` read as ``python``, a glob read as its matches, a module's
    ``--help`` asked once, a script's variables read by it or by a module it runs."""
    words = ["python" if w == "python3" else w for w in words]
    words = [m for w in words for m in (sorted(str(p.relative_to(REPO)) for p in REPO.glob(w)) or [w])] \
        if any("*" in w for w in words) else words  # fmt: skip
    env, rest = readme._split_env(words)
    shown = " ".join(words)
    missing = readme._paths_exist(rest) + readme._paths_exist([f"={v}" for v in env.values()])
    assert not missing, f"{shown}: no such path {missing}"
    if rest[:2] == ["python", "-m"] and not rest[2].startswith("launchtune"):
        module, args = rest[2], rest[3:]
        text = _help(module, args[0] if args and not args[0].startswith("-") else None)
        for flag in (w.split("=", 1)[0] for w in args if w.startswith("--")):
            assert re.search(rf"{re.escape(flag)}\b", text), f"{shown}: {flag} is not in {module}'s --help"
    elif rest[:1] == ["bash"]:
        assert (REPO / rest[1]).is_file(), f"{shown}: no script {rest[1]}"
        body = _read_by(rest[1])
        for key in env:
            assert re.search(rf"\b{key}\b", body), f"{shown}: {rest[1]} never reads {key}"
    elif rest[0] == "PROSE":  # `launchtune sweep --strategy` in a sentence: the command and its flags exist
        from launchtune.pipeline.cli import COMMANDS

        assert rest[2] in COMMANDS, f"{shown}: no such command"
        text = _help("launchtune", rest[2])
        for flag in (w.split("=", 1)[0] for w in rest[3:] if w.startswith("--")):
            assert re.search(rf"{re.escape(flag)}\b", text), f"{shown}: {flag} is not in its --help"
    else:
        readme._check_command(words)


@pytest.mark.parametrize("path", READMES, ids=[str(p.relative_to(REPO / "data")) for p in READMES])
def test_each_command_of_a_data_readme_names_what_this_tree_has(path):
    failures = []
    for words in _commands(path.read_text()):
        try:
            _check(words)
        except AssertionError as exc:
            failures.append(str(exc).splitlines()[0])
    assert not failures, "\n".join(failures)


def test_the_data_commands_are_found_and_a_stale_one_fails():
    text = (
        "Made by `SEEDS=0 bash benchmarks/live_search_gpu.sh` and\n\n```bash\n"
        "python3 -m benchmarks.live_search --join A B --out x   # joined\n```\n"
        "<!-- data-command: earlier tree (renamed since) -->\n"
        "```bash\npython3 -m benchmarks.gone --x 1\n```\n"
        "<!-- data-command: earlier tree (a flag of then) -->\n"
        "Ran `python -m benchmarks.live_search --gone`.\n\n"
        "A search (`launchtune sweep --strategy`).\n"
    )
    found = _commands(text)
    assert found == [
        ["python3", "-m", "benchmarks.live_search", "--join", "A", "B", "--out", "x"],
        ["SEEDS=0", "bash", "benchmarks/live_search_gpu.sh"],
        ["PROSE", "launchtune", "sweep", "--strategy"],
    ]
    for words in found:
        _check(words)
    for stale in (
        "python3 -m benchmarks.live_search --no-such-flag 1",
        "NO_SUCH_VAR=1 bash benchmarks/live_search_gpu.sh",
        "python -m benchmarks.no_such_module --out x",
        "launchtune no-such-command",
        "PROSE launchtune sweep --no-such-flag",
        "PROSE launchtune no-such-command",
        "python -m benchmarks.live_search --reference data/no/such/sweep --out x",
    ):
        with pytest.raises(AssertionError):
            _check(shlex.split(stale))
