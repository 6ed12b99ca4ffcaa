"""Which folders the project may delete from or replace files in: only those it made and can prove it made.

A folder the project creates (a sweep's, or combine's output) gets a marker file, ``.launchtune``, holding its
kind (``sweep`` or ``combined``) and a random id. A folder without the marker is the user's: reading it is
fine, but nothing in it is cleared or replaced; the command that would is refused with one line.

Folders made before the marker existed (the committed sweeps under ``data/``) count as made by the project
when their ``sweep.json`` says so: a sweep's has a ``planning_key`` and the folder has ``plan/``; a combined
folder's ``sweep.json`` has a ``combined`` block. Such a folder is not marked afterwards (a committed folder
stays as committed).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Literal

from launchtune.kernels.files import MARKER, project_folder_above

from ..errors import UserError
from ..jsonio import read_json, write_json
from ..records import checked

Kind = Literal["sweep", "combined"]
KINDS = ("sweep", "combined")
# What a folder may hold and still count as empty: the lock and the cluster files a sweep makes before it
# claims the folder, and the marker itself.
IGNORED = {MARKER, ".sweep.lock", ".dask"}


def marker_kind(folder: Path) -> Kind | None:
    """The kind the marker names, or None where there is no marker; a malformed marker is a user error."""
    path = folder / MARKER
    data = checked(read_json(path, "folder marker"), "folder marker", path)
    if data is None:
        return None
    kind: Kind = data["kind"]
    return kind


def legacy_kind(folder: Path) -> Kind | None:
    """The kind of a folder made before markers, read from its ``sweep.json`` (None: not the project's)."""
    meta = checked(
        read_json(folder / "sweep.json", "sweep description"), "sweep description", folder / "sweep.json"
    )
    if not isinstance(meta, dict) or not isinstance(meta.get("spec"), dict):
        return None
    if isinstance(meta.get("combined"), dict):
        return "combined"
    if isinstance(meta.get("planning_key"), dict) and (folder / "plan").is_dir():
        return "sweep"
    return None


def owner(folder: Path) -> Kind | None:
    """Who made ``folder``: its marker, else what its ``sweep.json`` proves; None where nothing does."""
    return marker_kind(folder) or legacy_kind(folder)


def is_empty(folder: Path) -> bool:
    """No such folder, or nothing in it but the lock, the cluster files and the marker."""
    if not folder.exists():
        return True
    return folder.is_dir() and all(p.name in IGNORED for p in folder.iterdir())


def write_marker(folder: Path, kind: Kind) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{folder}: cannot make this folder ({exc.strerror or exc})") from None
    write_json(folder / MARKER, {"kind": kind, "id": uuid.uuid4().hex})


def claim(folder: Path, kind: Kind, flag: str) -> None:
    """Make sure ``folder`` is one the project may write ``kind`` results into, marking it where it is new,
    empty or made before markers; refuse it with one line otherwise (``flag``: what the user named it by)."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder}: not a folder; pick another {flag}")
    found = owner(folder) if folder.is_dir() else None
    if found == kind:  # a folder made before markers stays unmarked: a committed one is not written to
        return
    if found is not None:
        made = "a measured sweep" if found == "sweep" else "a combined sweep (made by `combine`)"
        raise UserError(f"{folder}: holds {made}; pick another {flag} for this {kind}")
    if not is_empty(folder):
        raise UserError(
            f"{folder}: holds files launchtune did not make (no {MARKER} marker); pick another {flag}, a new "
            "or empty folder (nothing in a folder the project did not make is replaced or deleted)"
        )
    write_marker(folder, kind)


def require_owned(folder: Path, kind: Kind, action: str) -> None:
    """Refuse ``action`` (deleting or replacing files) in a folder the project cannot prove it made."""
    if owner(folder) != kind:
        raise UserError(
            f"{folder}: not a {kind} folder made by launchtune (no {MARKER} marker, no sweep.json saying "
            "so); "
            f"refusing to {action}"
        )


def refuse_inside_project_folder(path: Path | str, what: str) -> None:
    """Refuse to write ``what`` (a file a user named: an export, a dataset, a cache) at ``path`` where a
    folder made by launchtune holds it: that folder's files are its own (a sweep's ``sweep.json``, its table,
    its merged rows), and a file written among them replaces or confuses its records. One line, before
    anything is written."""
    folder = project_folder_above(path)
    if folder is not None:
        raise UserError(
            f"{path}: inside {folder}, a folder launchtune made (a sweep's or combine's); nothing but the "
            f"sweep writes there: write the {what} outside it"
        )
