"""The Python API's arguments, checked at the call: one table of what each argument name takes, one function
that checks a call's arguments against it. A mistake is a ``TypeError`` or ``ValueError`` whose one line
names the argument, raised before anything is written or started (:mod:`launchtune.api`).

Hand-written rather than a typing validator (pydantic, typeguard): the rules are ranges and Kernel Tuner's
loose shapes (a string or a list of them, a number or a tuple), which a type annotation does not say, and the
message must name the argument as the caller wrote it."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _int(v: Any) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)


def _real(v: Any) -> bool:
    return (
        isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_)
    ) and (math.isfinite(float(v)))


def _seq(v: Any) -> bool:
    return isinstance(v, Sequence | np.ndarray) and not isinstance(v, str | bytes)


def _path(v: Any) -> bool:
    return isinstance(v, str | Path) and str(v) != ""


def _none_or(rule: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or rule(v)


# name: (what it takes, in the words of the message; the test)
RULES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "kernel_name": ("the name of the kernel (a string)", lambda v: isinstance(v, str) and v != ""),
    "kernel_source": (
        "the CUDA code, a file name, or a function of a configuration returning the code",
        lambda v: isinstance(v, str | Path) or callable(v),
    ),  # fmt: skip
    "problem_size": (
        "an integer, one to three of them, a parameter's name, or a function of a configuration",
        lambda v: _int(v) or isinstance(v, str) or callable(v) or (_seq(v) and len(v) > 0),
    ),  # fmt: skip
    "arguments": ("a list of the kernel's arguments", _seq),
    "tune_params": (
        "a dict of parameter name to its list of values",
        lambda v: isinstance(v, Mapping) and len(v) > 0,
    ),  # fmt: skip
    "params": ("a dict of parameter name to one value", lambda v: isinstance(v, Mapping)),
    "restrictions": (
        "a string, a function of a configuration, or a list of them",
        _none_or(lambda v: isinstance(v, str) or callable(v) or _seq(v)),
    ),  # fmt: skip
    "grid_div_x": (
        "a list of parameter names or expressions",
        _none_or(lambda v: isinstance(v, str) or _seq(v) or callable(v)),
    ),
    "grid_div_y": (
        "a list of parameter names or expressions",
        _none_or(lambda v: isinstance(v, str) or _seq(v) or callable(v)),
    ),
    "grid_div_z": (
        "a list of parameter names or expressions",
        _none_or(lambda v: isinstance(v, str) or _seq(v) or callable(v)),
    ),
    "block_size_names": (
        "a list of up to three names",
        _none_or(lambda v: _seq(v) and len(v) <= 3 and all(isinstance(n, str) for n in v)),
    ),
    "cmem_args": ("a dict of __constant__ symbol to array", _none_or(lambda v: isinstance(v, Mapping))),
    "smem_args": ("a dict with 'size' (bytes)", _none_or(lambda v: isinstance(v, Mapping))),
    "texmem_args": ("a dict", _none_or(lambda v: isinstance(v, Mapping))),
    "answer": ("a list aligned with arguments (None where unchecked)", _none_or(_seq)),
    "verify": ("a function (answer, result, atol=) -> bool", _none_or(callable)),
    "atol": ("a finite number >= 0", lambda v: _real(v) and v >= 0),
    "compiler_options": (
        "a string or a list of strings",
        _none_or(lambda v: isinstance(v, str) or (_seq(v) and all(isinstance(o, str) for o in v))),
    ),  # fmt: skip
    "defines": ("a dict of name to value", _none_or(lambda v: isinstance(v, Mapping))),
    "iterations": ("an integer from 1 to 10000", lambda v: _int(v) and 1 <= v <= 10_000),
    "metrics": (
        "a dict of name to an expression string or a function of a result",
        _none_or(lambda v: isinstance(v, Mapping) and all(isinstance(k, str) for k in v)),
    ),  # fmt: skip
    "objective": (
        "the name of a metric or a measured quantity",
        _none_or(lambda v: isinstance(v, str) and v != ""),
    ),
    "objective_higher_is_better": ("True or False", _none_or(lambda v: isinstance(v, bool))),
    "strategy": ("a strategy's name", _none_or(lambda v: isinstance(v, str) and v != "")),
    "strategy_options": ("a dict of option name to value", _none_or(lambda v: isinstance(v, Mapping))),
    "budget": ("an integer >= 1", _none_or(lambda v: _int(v) and v >= 1)),
    "samples": ("an integer >= 0", _none_or(lambda v: _int(v) and v >= 0)),
    "max_minutes": ("a finite number > 0", _none_or(lambda v: _real(v) and v > 0)),
    "workers_per_class": ("an integer >= 1", lambda v: _int(v) and v >= 1),
    "gpu_classes": (
        "a GPU class's name or a list of them",
        _none_or(lambda v: isinstance(v, str) or (_seq(v) and all(isinstance(c, str) for c in v))),
    ),  # fmt: skip
    "prior": ("a list of sweep folders or caches", _none_or(lambda v: _seq(v) and all(_path(p) for p in v))),
    "allow_workload": ("a list of workload names", lambda v: _seq(v) and all(isinstance(w, str) for w in v)),
    "out": ("a folder (a string or a Path)", _none_or(_path)),
    "folder": ("a folder (a string or a Path)", _path),
    "spec": ("a sweep spec's path or its mapping", lambda v: _path(v) or isinstance(v, Mapping)),
    "cache": ("a Kernel Tuner cache file (a string or a Path)", _none_or(_path)),
    "seed": ("an integer >= 0", _none_or(lambda v: _int(v) and v >= 0)),
    "default": ("a dict of parameter name to value", _none_or(lambda v: isinstance(v, Mapping))),
    "observers": ("a list of observers", _none_or(_seq)),
    "lang": ("a language's name", _none_or(lambda v: isinstance(v, str))),
    "device": ("a device number >= 0", lambda v: _int(v) and v >= 0),
    "platform": ("a platform number >= 0", lambda v: _int(v) and v >= 0),
    # booleans are bools: "no" is not False
    **{name: ("True or False", lambda v: isinstance(v, bool)) for name in ("force", "verbose", "quiet")},
    "simulation_mode": ("True or False", _none_or(lambda v: isinstance(v, bool))),
    **{
        name: ("True, False or None", _none_or(lambda v: isinstance(v, bool)))
        for name in ("progress", "train_models", "remeasure")
    },
}


# No argument takes an integer past 64 bits (sizes, counts, seeds, a kernel's scalars and #defines): a larger
# one is refused at the call, naming the argument. Past 4,300 digits Python refuses to write an int at all,
# and every message that showed one (a limit's, a YAML copy of the arguments) raised a ValueError of its own.
MAX_INT_BITS = 64
_WALK_ITEMS = 10_000  # items looked at per argument (lists, tuples, dict keys and values), to depth 4


def _huge_int(value: Any, depth: int = 0, seen: list[int] | None = None) -> int | None:
    """The first Python int in ``value`` past :data:`MAX_INT_BITS` (walking lists, tuples and dicts), or
    None."""
    seen = [0] if seen is None else seen
    seen[0] += 1
    if isinstance(value, int) and not isinstance(value, bool):
        return value if abs(value).bit_length() > MAX_INT_BITS else None
    if depth >= 4 or seen[0] > _WALK_ITEMS:
        return None
    items: Any = ()
    if isinstance(value, Mapping):
        items = itertools.chain.from_iterable(value.items())
    elif isinstance(value, list | tuple):
        items = value
    for item in items:
        if seen[0] > _WALK_ITEMS:
            break
        found = _huge_int(item, depth + 1, seen)
        if found is not None:
            return found
    return None


def shown(value: Any, width: int = 80) -> str:
    """``repr(value)`` for a one-line message: at most ``width`` characters, and never an error of its own (an
    int past Python's 4,300 digits is described, not written; a ``__repr__`` that raises is the type's
    name)."""
    if isinstance(value, int) and abs(value).bit_length() > 1000:
        return f"an integer of about {int(abs(value).bit_length() * math.log10(2)) + 1:,} digits"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001  (Python's digit limit inside a list; a hostile __repr__)
        return f"a {type(value).__name__}"
    text = " ".join(text.split()) if "\n" in text or "\r" in text else text
    return text if len(text) <= width else text[: width - 3] + "..."


def check_arguments(values: Mapping[str, Any]) -> None:
    """Each of ``values`` (an argument name and what the caller passed) against :data:`RULES`; names without a
    rule (a cluster object, a function's own) are the caller's to check. Every argument: no integer in it past
    :data:`MAX_INT_BITS`."""
    for name, value in values.items():
        try:
            huge = _huge_int(value)
        except Exception:  # noqa: BLE001  (a hostile mapping's items(): its own rule says so below)
            huge = None
        if huge is not None:
            raise ValueError(
                f"{name}: {shown(huge)} is past any value it takes (at most {MAX_INT_BITS} bits)"
            )
        rule = RULES.get(name)
        if rule is None:
            continue
        wants, test = rule
        try:
            ok = bool(test(value))
        except Exception:  # noqa: BLE001  (a hostile __len__ or __iter__ is a wrong type too)
            ok = False
        if not ok:
            error = (
                ValueError
                if isinstance(value, type(None) | bool | int | float | str) and _typed(name, value)
                else TypeError
            )
            raise error(f"{name}: expected {wants}, got {shown(value)}")


def _typed(name: str, value: Any) -> bool:
    """Whether ``value`` has a right type for ``name`` and only its range is wrong (a ``ValueError``)."""
    numeric = {
        "atol",
        "iterations",
        "budget",
        "samples",
        "max_minutes",
        "workers_per_class",
        "seed",
        "device",
        "platform",
    }
    return name in numeric and (_int(value) or isinstance(value, float))
