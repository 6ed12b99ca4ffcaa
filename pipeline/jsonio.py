"""The JSON files of a sweep folder (sweep.json, plan, metrics, validation, report, timing): read one that may
be missing, write one atomically so a killed run never leaves half a file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernels.atomic import write_text
from pipeline.errors import UserError


def read_json(path: Path, what: str = "JSON") -> Any:
    """The parsed file, or None where there is none; an unreadable one is a user error naming it."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise UserError(f"{path}: unreadable {what} ({exc})") from None


def write_json(path: Path, data: Any) -> None:
    """Write through a temporary file and a rename (atomic on one file system)."""
    write_text(path, json.dumps(data, indent=1, default=str) + "\n")
