"""Loading YAML configs and specs with errors that name the file and the field."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from pipeline.errors import UserError


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Parse ``path`` as a YAML mapping or raise a UserError naming the file (and line, for syntax errors)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{path}: malformed YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of keys to values at the top level")
    return data


def check_keys(
    mapping: Mapping[str, Any], where: str, *, required: Iterable[str] = (), optional: Iterable[str] = ()
) -> None:
    """Reject unknown and missing keys; ``where`` is ``"file.yaml: field"`` for the message."""
    required, optional = set(required), set(optional)
    unknown = sorted(set(mapping) - required - optional)
    if unknown:
        allowed = ", ".join(sorted(required | optional))
        raise UserError(f"{where}: unknown key {unknown[0]!r} (allowed: {allowed})")
    missing = sorted(required - set(mapping))
    if missing:
        raise UserError(f"{where}: missing key {missing[0]!r}")
