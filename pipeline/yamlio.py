"""Sweep specs and cluster configs: loaded by the one YAML loader (``kernels.yamlfile``), each mistake a
``UserError`` naming the file and the field."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from launchtune.kernels.yamlfile import MAX_BYTES, YamlError
from launchtune.kernels.yamlfile import load_yaml as _load

from .errors import UserError

__all__ = ["MAX_BYTES", "check_keys", "load_yaml"]


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Parse ``path`` as a YAML mapping (``kernels.yamlfile``, the one loader: no aliases, bounded) or raise
    a UserError naming the file (and line, for syntax errors)."""
    try:
        return _load(path, "YAML config", MAX_BYTES)
    except YamlError as exc:
        raise UserError(str(exc)) from None


def check_keys(
    mapping: Mapping[str, Any], where: str, *, required: Iterable[str] = (), optional: Iterable[str] = ()
) -> None:
    """Reject unknown and missing keys; ``where`` is ``"file.yaml: field"`` for the message."""
    required, optional = set(required), set(optional)
    unknown = sorted(set(mapping) - required - optional, key=repr)  # a YAML key may be a number or null
    if unknown:
        allowed = ", ".join(sorted(required | optional))
        raise UserError(f"{where}: unknown key {unknown[0]!r} (allowed: {allowed})")
    missing = sorted(required - set(mapping))
    if missing:
        raise UserError(f"{where}: missing key {missing[0]!r}")
