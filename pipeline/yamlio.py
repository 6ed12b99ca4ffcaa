"""Loading YAML configs and specs with errors that name the file and the field."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from launchtune.kernels import files
from launchtune.pipeline.errors import UserError

# A spec or cluster config is a page of YAML. Bounds, so a hostile or broken file is one line, not a stalled
# machine: its bytes, and the nodes it stands for once every alias is expanded (a "billion laughs" file of a
# few hundred bytes, nine anchors of nine aliases each, stands for 9^9 nodes: PyYAML builds it shared, but
# whatever walks it later, a copy, JSON, a message, walks all of them).
MAX_BYTES = 1 << 20
MAX_NODES = 100_000


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Parse ``path`` as a YAML mapping or raise a UserError naming the file (and line, for syntax errors)."""
    path = Path(path)
    try:  # a FIFO, a device, a directory, a loop or a 4 GB file: one line, before a byte is read
        raw = files.read_regular(path, "YAML config", MAX_BYTES, missing_ok=True)
    except files.FileRefused as exc:
        raise UserError(str(exc)) from None
    if raw is None:
        raise UserError(f"{path}: no such file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not a text file (byte {exc.start} is not UTF-8); expected YAML") from None
    if "\0" in text:
        raise UserError(f"{path}: not a text file (it holds NUL bytes); expected YAML")
    loader = files.UniqueKeyLoader(text)  # SafeLoader, a key twice in one mapping refused
    try:
        node = loader.get_single_node()
        _check_expanded_size(node, path)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{path}: malformed YAML{where}: {problem}") from None
    except RecursionError:
        raise UserError(f"{path}: YAML nested too deeply") from None
    except ValueError as exc:  # a value PyYAML cannot build (a date such as 2021-02-30)
        raise UserError(f"{path}: {str(exc).split(';')[0]}") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of keys to values at the top level")
    return data


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expanded_size(root: yaml.Node | None, path: Path) -> None:
    """Refuse a document that, its aliases expanded, has more than ``MAX_NODES`` nodes, or an alias inside
    its own anchor (a loop). PyYAML has no such bound (its loaders refuse no alias), hence this walk of the
    composed graph: each node once, depth first, without recursion."""
    if root is None:
        return
    sizes: dict[int, int] = {}  # id(node) -> nodes it stands for, expanded
    open_ids: set[int] = set()  # the nodes on the current path
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        key = id(node)
        if closing:
            open_ids.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            if sizes[key] > MAX_NODES:
                raise UserError(
                    f"{path}: its aliases expand to more than {MAX_NODES:,} YAML nodes "
                    f"(line {node.start_mark.line + 1}); refused"
                )
            continue
        if key in sizes:
            continue
        if key in open_ids:
            raise UserError(
                f"{path}: an alias inside its own anchor (line {node.start_mark.line + 1}); refused"
            )
        open_ids.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


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
