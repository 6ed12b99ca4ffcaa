"""What a user reads (every command's --help, README.md, docs/) works in a clone as it comes: examples in the
console script's name, each on its lines as typed, and no path to the lab's folder beside the repository (a
clone has none); the tests themselves read nothing there either."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from launchtune.pipeline.cli import COMMANDS, build_parser
from launchtune.pipeline.strategies import strategy_names

ROOT = Path(__file__).resolve().parents[2]
# a path that reaches out of the repository to the lab's folder beside it (its name kept apart, so this file
# names no such path itself)
_SIBLING = "shared"
_SHARED = re.compile(r"\.\./" + _SIBLING + r"|parents?\b[^\n]*[\"']" + _SIBLING + r"[\"']")


def _helps() -> dict[str, str]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: sub.choices[name].format_help() for name in COMMANDS}


HELPS = _helps()


@pytest.mark.parametrize("command", COMMANDS)
def test_help_examples_are_launchtune_commands_on_their_own_lines(command):
    text = HELPS[command]
    assert "python -m pipeline" not in text and not _SHARED.search(text)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("  launchtune "):
            continue
        # a swallowed line join leaves a run of spaces before the next flag inside one line
        assert not re.search(r"\S {3,}-", line.split("#")[0]), line
        if line.split("#")[0].rstrip().endswith("\\"):
            assert lines[i + 1].startswith("      "), (line, lines[i + 1])


def test_the_sweep_help_shows_its_continued_example_on_two_lines():
    text = HELPS["sweep"]
    assert "--budget 20 \\\n      --prior results/h100_sweep" in text


def test_strategies_help_names_each_strategy_once_in_groups():
    text = HELPS["strategies"]
    names = strategy_names()
    assert "{default," not in text  # argparse's choices block, printed in the usage and again in the options
    section = text[text.index("strategies (--strategy NAME") : text.index("examples")]
    words = re.findall(r"[\w:]+", section)
    for name in names:
        assert name in words
        if name.startswith("kt:"):
            assert text.count(name) == 1, name
    assert max(len(line) for line in section.splitlines()) <= 110


def test_strategies_list_prints_one_name_per_line_without_a_dataset():
    command = [sys.executable, "-m", "launchtune", "strategies", "--list"]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == strategy_names()


def test_an_unknown_strategy_is_still_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["strategies", "--dataset", "x", "--strategy", "nope"])
    assert e.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "--strategy" in line and "'nope'" in line


def test_readme_and_docs_never_send_a_user_to_shared():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    assert len(pages) > 5
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in pages for m in _SHARED.finditer(p.read_text())]
    assert not found


def test_no_test_reads_the_shared_folder():
    sources = sorted((ROOT / "tests").rglob("*.py"))
    assert Path(__file__) in sources
    found = [
        str(p.relative_to(ROOT)) for p in sources if p != Path(__file__) and _SHARED.search(p.read_text())
    ]
    assert not found
    # the pattern catches what it must: the fixture that used to read the folder, and a path to it
    assert _SHARED.search('SHARED = REPO.parent / "' + _SIBLING + '"')
    assert _SHARED.search("HUB=../" + _SIBLING + "/data/benchmark_hub") and not _SHARED.search(
        "data/benchmark_hub"
    )
