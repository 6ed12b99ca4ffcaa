"""Measured figures in the README and docs, generated from committed data (``python -m tools.readme``).

The project's own maintenance tool (not installed with the package); the test suite runs ``--check``.

A figure typed by hand drifts from the data behind it; here every measured table or sentence lives in a
generated block of a Markdown file::

    <!-- generated: NAME (python -m tools.readme) -->
    ...rendered from committed files, never edited by hand...
    <!-- end generated: NAME -->

``NAME`` is a key of ``tools.blocks.BLOCKS``, whose function takes the repository root and returns the
block's Markdown from files under ``data/``. ``render`` rewrites every block of a text, ``check`` lists the
blocks that differ from what the data gives (the test suite runs it on the real files, so drift fails CI).

Adding a block: ``tools/blocks.py`` says how.

The marker parsing is hand-written (a regular expression) because it is ten lines and no Markdown library
keeps comments and layout byte for byte.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from tools.blocks import BLOCKS, ReadmeError

# the files whose generated blocks are kept up to date, relative to the repository root: the README and every
# page of docs/ (a new page is checked without being listed here)
FILES = ("README.md",)


def checked_files(root: Path) -> tuple[str, ...]:
    """README.md and every Markdown page under docs/ of ``root``, relative to it."""
    return FILES + tuple(sorted(str(p.relative_to(root)) for p in (root / "docs").glob("*.md")))


_BLOCK = re.compile(
    r"(?P<open><!-- generated: (?P<name>[\w-]+) \(python -m tools.readme\) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- end generated: (?P=name) -->)",
    re.S,
)
_ANY_MARKER = re.compile(r"<!-- (?:end )?generated: ([\w-]+)")


# ---------------------------------------------------------------- render and check


def _check_markers(text: str, where: str) -> None:
    """Every opening marker has its closing one, and every name is known."""
    opened = [m.group(1) for m in _ANY_MARKER.finditer(text)]
    paired = [m.group("name") for m in _BLOCK.finditer(text)]
    if len(opened) != 2 * len(paired):
        unpaired = sorted(set(opened) - set(paired)) or sorted(set(opened))
        raise ReadmeError(f"{where}: generated block markers not balanced ({', '.join(unpaired)})")
    unknown = sorted(set(paired) - set(BLOCKS))
    if unknown:
        raise ReadmeError(
            f"{where}: unknown generated block {', '.join(unknown)} (known: {', '.join(BLOCKS)})"
        )


def render(text: str, root: Path, where: str = "text") -> str:
    """``text`` with every generated block rendered anew from the data under ``root``."""
    _check_markers(text, where)
    return _BLOCK.sub(lambda m: m.group("open") + BLOCKS[m.group("name")](root) + m.group("close"), text)


def differences(root: Path, files: tuple[str, ...] | None = None) -> dict[str, str]:
    """For each file whose blocks differ from what the data gives: a unified diff (empty dict: all match)."""
    out = {}
    for rel in checked_files(root) if files is None else files:
        path = root / rel
        if not path.exists():
            continue
        old = path.read_text()
        new = render(old, root, where=str(path))
        if new != old:
            diff = difflib.unified_diff(
                old.splitlines(), new.splitlines(), rel, f"{rel} (from data)", lineterm=""
            )
            out[rel] = "\n".join(diff)
    return out


def rewrite(root: Path, files: tuple[str, ...] | None = None) -> list[str]:
    """Rewrite the generated blocks of ``files`` (default: :func:`checked_files`) in place; returns the files
    that changed."""
    from launchtune.kernels.atomic import write_text

    changed = []
    for rel in checked_files(root) if files is None else files:
        path = root / rel
        if not path.exists():
            continue
        old = path.read_text()
        new = render(old, root, where=str(path))
        if new != old:
            write_text(path, new)
            changed.append(rel)
    return changed


ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the generated blocks (``--check``: compare only, exit 1 naming each block that differs)."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m tools.readme", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 naming every block that differs"
    )
    ap.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this checkout)")
    args = ap.parse_args(argv)
    try:
        if args.check:
            diffs = differences(args.root)
            for rel, diff in diffs.items():
                print(f"{rel}: generated blocks differ from the data (run `python -m tools.readme`)")
                print(diff)
            if not diffs:
                print("generated blocks match the committed data")
            return 1 if diffs else 0
        changed = rewrite(args.root)
    except ReadmeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("rewrote " + ", ".join(changed) if changed else "nothing to rewrite", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
