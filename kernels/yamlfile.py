"""The one YAML loader: every YAML file the project reads (sweep specs, cluster configs, kernel specs, the
benchmarks' specs) is parsed here, with one rule for all of them.

- **No aliases** (``*name``): refused with one line naming the file and the line. A spec or a config is a
  page a person writes; aliases are how a few hundred bytes stand for millions of nodes (a "billion laughs"),
  and a ``<<: *base`` merge hides which value a key has. Write each value where it is used.
- **Bounded**: the file's bytes (its reader's cap, checked before a byte is read: a FIFO, a device or a 4 GB
  file is one line), its YAML nodes and its depth (counted on the parser's events, before any node or Python
  object is built: PyYAML's composer recurses, so a file nested thousands deep would be a RecursionError).
- **A key twice in one mapping** is refused at the second key's line (PyYAML keeps the last silently).

It lives in ``kernels`` because the kernel spec and the runtime autotuner read YAML too and ``kernels`` never
imports ``pipeline``; ``pipeline.yamlio`` turns its :class:`YamlError` into a ``UserError``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from . import files

MAX_BYTES = 1 << 20  # a spec or a cluster config is a page; a kernel spec's reader asks for less
MAX_NODES = 100_000  # parser events (scalars, collection starts and ends)
MAX_DEPTH = 32  # the deepest a shipped spec nests is 4


class YamlError(ValueError):
    """A YAML file that cannot be read; the message is one line naming the file (and the line where known)."""


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader refusing a mapping that names a key twice (it keeps the last one silently, as
    ``json`` does): a ``ConstructorError`` at the second key's line, so the message says where."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<: {...}`` merges; it is not a key
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                twice = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base loader says so
                break
            if twice:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} twice in one mapping", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """An integer past Python's 4,300 digits is a ``ConstructorError`` at its line, not a bare
        ``ValueError`` that names no place in the file."""
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"an integer of {len(node.value):,} characters (at most 4,300 digits)",
                node.start_mark,
            ) from None


UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", UniqueKeyLoader.construct_yaml_int)


def load_yaml(
    path: str | Path, what: str = "YAML", max_bytes: int = MAX_BYTES, max_nodes: int = MAX_NODES
) -> dict[Any, Any]:
    """The mapping at the top of the YAML file ``path``: read through ``kernels.files`` (a regular file of at
    most ``max_bytes``; ``what`` names it in the message), then :func:`parse_yaml`."""
    path = Path(path)
    try:
        raw = files.read_regular(path, what, max_bytes, missing_ok=True)
    except files.FileRefused as exc:
        raise YamlError(str(exc)) from None
    if raw is None:
        raise YamlError(f"{path}: no such file")
    return parse_yaml(raw, path, max_nodes)


def parse_yaml(raw: bytes, path: str | Path, max_nodes: int = MAX_NODES) -> dict[Any, Any]:
    """``raw`` (the bytes of ``path``, for a reader that keeps them) parsed as a YAML mapping: UTF-8 text, no
    alias, at most ``max_nodes`` nodes and :data:`MAX_DEPTH` levels, no key twice; else a :class:`YamlError`
    naming ``path``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlError(f"{path}: not a text file (byte {exc.start} is not UTF-8); expected YAML") from None
    if "\0" in text:
        raise YamlError(f"{path}: not a text file (it holds NUL bytes); expected YAML")
    try:
        _check_events(text, path, max_nodes)
        data = yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader, a key twice refused
    except YamlError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise YamlError(f"{path}: malformed YAML{where}: {problem}") from None
    except ValueError as exc:  # a value PyYAML cannot build (a date such as 2021-02-30)
        raise YamlError(f"{path}: {str(exc).split(';')[0]}") from None
    if not isinstance(data, dict):
        raise YamlError(f"{path}: expected a mapping of keys to values at the top level")
    return data


def _check_events(text: str, path: str | Path, max_nodes: int) -> None:
    """Refuse an alias, more than ``max_nodes`` events or more than :data:`MAX_DEPTH` levels, reading the
    parser's events one at a time (nothing is composed or built before the whole file has passed)."""
    depth = 0
    for count, event in enumerate(yaml.parse(text, Loader=UniqueKeyLoader)):
        if isinstance(event, yaml.AliasEvent):
            line = event.start_mark.line + 1 if event.start_mark else "?"
            name = (event.anchor or "")[:40]
            raise YamlError(
                f"{path}: YAML aliases (*{name}) are not allowed (line {line}); write the value out in full"
            )
        if count > max_nodes:
            raise YamlError(f"{path}: too large (over {max_nodes:,} YAML nodes)")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlError(f"{path}: YAML nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
