"""Where results may be written: every output path is resolved and checked to lie inside the results folder.

A sweep spec is data that may come from someone else; it names an output folder, and that name must not be
able
to point a worker at ``~/.ssh`` or another user's files (``../..``, absolute paths, symlinks out of the tree).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pipeline.errors import UserError

RESULTS_ENV = "LAUNCHTUNE_RESULTS"
_SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def results_root() -> Path:
    """The folder every sweep writes under: ``$LAUNCHTUNE_RESULTS`` or ``./results``."""
    return Path(os.environ.get(RESULTS_ENV, "results")).expanduser().resolve()


def check_slug(value: str, where: str) -> str:
    """A name that becomes one path component (sweep name, GPU class): letters, digits, ``._-`` only."""
    if not isinstance(value, str) or not _SLUG.match(value) or value in {".", ".."}:
        raise UserError(f"{where}: {value!r} must be a plain name (letters, digits, '.', '_', '-')")
    return value


def inside(root: Path, relative: str | Path, where: str) -> Path:
    """``root / relative`` resolved (symlinks followed); refused when it lands outside ``root``."""
    root = Path(root).resolve()
    target = (root / relative).resolve()
    if target != root and root not in target.parents:
        raise UserError(f"{where}: {str(relative)!r} resolves to {target}, outside the results folder {root}")
    return target


def assert_inside(root: Path, path: Path) -> Path:
    """The worker-side guard: a path handed to a worker must resolve inside the sweep folder it was given."""
    root, path = Path(root).resolve(), Path(path).resolve()
    if root not in path.parents:
        raise PermissionError(f"refusing to write {path}: outside the sweep folder {root}")
    return path
