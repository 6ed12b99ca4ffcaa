"""A C header with each GPU class's tuned configuration, so C, C++ or Fortran code compiles in it.

As Kernel Tuner's ``create_device_targets`` (its integration module): one ``#if`` block per GPU class,
chosen at compile time with ``-DTARGET_<CLASS>`` (``-DTARGET_H100``), the default configuration otherwise,
and all of it skipped while Kernel Tuner (or this project) tunes the kernel, which defines ``kernel_tuner``.
Each block holds the tunable parameters' defines and the launch geometry of the pick (``grid_size_x/y/z``
for the spec's problem size, ``block_size_x/y/z``), the same names the source sees while tuning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .expressions import ExpressionError
from .spec import KernelSpec

# What a GPU class may be to become a macro and a comment: the results folder's own rule for a class name
# (``pipeline.paths.check_slug``). Anything else (``*/``, a newline, ``#include``) is refused, never pasted.
_CLASS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# Every value becomes ``#define NAME VALUE`` used as a C ``int`` (launch geometry, template arguments).
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


class HeaderError(ValueError):
    """A tuning table that cannot become a header; the message names the entry and the field."""


@dataclass(frozen=True)
class Pick:
    """One GPU class's chosen configuration and what it measured (``ms`` None where not measured)."""

    gpu_class: str
    config: Mapping[str, int]
    ms: float | None = None  # the objective's cost (time in ms where the spec states no objective)


def target_macro(gpu_class: str) -> str:
    """``h100`` -> ``TARGET_H100``; any character a macro name cannot hold becomes ``_``."""
    return "TARGET_" + re.sub(r"\W", "_", gpu_class.upper())


def comment(text: str) -> str:
    """``text`` safe inside a C ``/* */`` comment on one line: printable ASCII only (anything else, a newline
    included, becomes ``?``), and no ``*/`` or ``/*`` (which would end the comment or nest one)."""
    safe = "".join(c if " " <= c <= "~" else "?" for c in text)
    while "*/" in safe or "/*" in safe:
        safe = safe.replace("*/", "*?").replace("/*", "?*")
    return safe


def check_config(spec: KernelSpec, config: Any, where: str) -> dict[str, int]:
    """``config`` as the header needs it: every tunable parameter present, each an integer that fits a C
    ``int``; ``HeaderError`` naming ``where`` and the parameter otherwise."""
    if not isinstance(config, Mapping):
        raise HeaderError(f"{where}: expected a configuration (parameter -> integer), got {config!r}"[:300])
    out = {}
    for name in spec.names:
        if name not in config:
            raise HeaderError(f"{where}: no value for the parameter {name!r}")
        value = config[name]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise HeaderError(f"{where}.{name}: expected an integer, got {value!r}"[:300])
        if not INT_MIN <= value <= INT_MAX:
            raise HeaderError(f"{where}.{name}: {value:.3g} does not fit a C int")
        out[name] = value
    return out


def _block(spec: KernelSpec, problem: tuple[int, int, int], raw: Any, where: str) -> list[str]:
    config = check_config(spec, raw, where)
    if min(spec.block(config)) < 1:
        raise HeaderError(f"{where}: thread block {spec.block(config)}; every extent must be >= 1")
    try:
        defines = spec.defines(config, problem)
    except ExpressionError as exc:
        raise HeaderError(f"{where}: {exc}") from None
    lines = []
    for name, value in defines.items():
        if not INT_MIN <= value <= INT_MAX:
            raise HeaderError(f"{where}: {name} = {value:.3g} does not fit a C int")
        lines.append(f"#define {name} {value}")
    return lines


def render_header(
    spec: KernelSpec,
    problem: tuple[int, int, int],
    picks: Sequence[Pick],
    default: Mapping[str, int] | None,
    origin: str,
) -> str:
    """The header's text; ``origin`` (the sweep it came from) goes in its first comment. ``HeaderError``
    for a pick that cannot be written as it is (a class that is not a plain name, two classes of one macro,
    a missing parameter, a value past a C ``int``, a zero block or grid divisor)."""
    size = "x".join(str(d) for d in problem if d > 1) or "1"
    macros: dict[str, str] = {}
    for i, pick in enumerate(picks):
        if not isinstance(pick.gpu_class, str) or not _CLASS.fullmatch(pick.gpu_class):
            raise HeaderError(
                f"entries[{i}].gpu_class: {pick.gpu_class!r} is not a plain name "
                "(letters, digits, '.', '_', '-')"[:300]
            )
        macro = target_macro(pick.gpu_class)
        if macro in macros:
            raise HeaderError(
                f"entries[{i}].gpu_class: {pick.gpu_class!r} and {macros[macro]!r} both become {macro}"
            )
        macros[macro] = pick.gpu_class
    lines = [
        f"/* Tuned configurations of {spec.kernel_name} ({comment(spec.source.name)}) "
        f"at problem size {size},",
        f"   one per GPU class, from {comment(origin)}.",
        "   Generated by `launchtune export --format c-header`; do not edit.",
        "   Compile with -DTARGET_<CLASS> (below) for a class's configuration; without one, the default. */",
        "#pragma once",
        "#ifndef kernel_tuner /* only when not tuning */",
    ]
    objective = spec.objective
    if not objective.is_time:
        lines.insert(3, f"   Ranked by the kernel spec's objective: {objective.describe()}.")
    order = sorted(range(len(picks)), key=lambda i: picks[i].gpu_class)
    for n, i in enumerate(order):
        pick = picks[i]
        ms = pick.ms if isinstance(pick.ms, int | float) and not isinstance(pick.ms, bool) else None
        value = objective.value(ms) if ms is not None else None
        unit = "ms" if objective.is_time else objective.name
        measured = f" ({value:.4g} {unit})" if value is not None else ""
        keyword = "#if" if n == 0 else "#elif"
        lines.append(f"{keyword} defined({target_macro(pick.gpu_class)})  /* {pick.gpu_class}{measured} */")
        lines += _block(spec, problem, pick.config, f"entries[{i}].best")
    lines.append("#else /* the default configuration */" if picks else "/* the default configuration */")
    lines += _block(spec, problem, default, "entries[0].default" if picks else "the spec's default")
    if picks:
        lines.append("#endif /* GPU targets */")
    lines.append("#endif /* kernel_tuner */")
    return "\n".join(lines) + "\n"
