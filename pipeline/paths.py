"""Where results may be written: every output path is resolved and checked to lie inside the results folder.

A sweep spec is data that may come from someone else; it names an output folder, and that name must not be
able
to point a worker at ``~/.ssh`` or another user's files (``../..``, absolute paths, symlinks out of the tree).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import UserError

RESULTS_ENV = "LAUNCHTUNE_RESULTS"
_SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def results_root() -> Path:
    """The folder every sweep writes under: ``$LAUNCHTUNE_RESULTS`` or ``./results``; one that exists and is
    not a folder is one line."""
    raw = os.environ.get(RESULTS_ENV, "results")
    try:
        root = Path(raw).expanduser().resolve()
    except (ValueError, OSError, RuntimeError) as exc:  # a NUL, a symlink loop, an unknown ~user
        raise UserError(f"${RESULTS_ENV}: {raw!r} is not a usable path ({exc})"[:300]) from None
    if root.exists() and not root.is_dir():
        raise UserError(f"${RESULTS_ENV}: {root} exists and is not a folder")
    return root


def make_folder(folder: Path, where: str = "--out") -> Path:
    """``folder`` and its parents made (kept where they exist); a path that cannot be a folder (under a
    file, in /proc, a name too long, no permission) is one line naming it and why."""
    try:
        if folder.exists() and not folder.is_dir():
            raise UserError(f"{folder}: exists and is not a folder (give {where} a folder)")
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"{folder}: cannot make this folder: {exc.strerror or exc} (give {where} another)"
        ) from None
    return folder


def check_slug(value: str, where: str) -> str:
    """A name that becomes one path component (sweep name, GPU class): letters, digits, ``._-`` only."""
    if not isinstance(value, str) or not _SLUG.match(value) or value in {".", ".."}:
        raise UserError(f"{where}: {value!r} must be a plain name (letters, digits, '.', '_', '-')")
    return value


def out_folder(path: Path, where: str = "--out") -> Path:
    """A folder given on the command line, absolute: ``~`` expanded, symlinks resolved; one line where it
    cannot be (an unknown ``~user``, a symlink loop)."""
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise UserError(f"{where}: {str(path)!r} is not a usable path ({exc})"[:300]) from None


def inside(root: Path, relative: str | Path, where: str) -> Path:
    """``root / relative`` resolved (symlinks followed); refused when it lands outside ``root``."""
    root = Path(root).resolve()
    try:
        target = (root / relative).resolve()
    except (ValueError, OSError) as exc:  # a NUL in the name; a symlink loop
        raise UserError(f"{where}: {str(relative)!r} is not a usable path ({exc})"[:300]) from None
    if target != root and root not in target.parents:
        raise UserError(f"{where}: {str(relative)!r} resolves to {target}, outside the results folder {root}")
    return target


def _resolved(root: Path, path: Path) -> tuple[Path, Path]:
    """``root`` and ``path`` with every symlink followed; one line where that cannot be (a loop, a NUL)."""
    try:
        return Path(root).resolve(), Path(path).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise UserError(f"{path}: not a usable path ({exc})"[:300]) from None


def within(root: Path, path: Path, what: str = "folder") -> Path:
    """``path`` itself, once it is known to resolve inside ``root`` (``root`` included): the one rule for
    every folder and file the project writes under a sweep, results or ``--out`` folder. A symlink where
    ``models/``, ``figures/``, ``merged/`` ... belongs that points out of it is refused with one line, not
    followed."""
    real_root, real = _resolved(root, path)
    if real != real_root and real_root not in real.parents:
        raise UserError(
            f"{path}: resolves to {real}, outside {root}; a {what} there must not lead out of it "
            "(remove the symlink)"
        )
    return Path(path)


def assert_inside(root: Path, path: Path) -> Path:
    """The worker-side guard: a path handed to a worker must resolve inside the sweep folder it was given."""
    root, path = _resolved(root, path)
    if root not in path.parents:
        raise PermissionError(f"refusing to write {path}: outside the sweep folder {root}")
    return path
