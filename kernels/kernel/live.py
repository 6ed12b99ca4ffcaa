"""What the caller hands a kernel workload built in its own process (one local device measures there:
``pipeline.cluster.inline``): device arrays used as they are, a ``verify`` function run on each
configuration's outputs, ``#define`` values computed by the caller's functions, and a function told of each
configuration as it is measured (Kernel Tuner's cache appended). None of these can travel to a worker in
another process (a Python function or a device pointer does not go into a file), so they are attached here,
by the kernel spec's path, for the time of the call; a workload built elsewhere finds nothing attached and
reads the spec's files alone (a ``caller`` fill there is one line; a function's text is among the inputs,
so another function is another folder).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Attached:
    """``arrays``: argument index (kernel order) -> a device array used as it is; ``verify``: Kernel Tuner's
    ``verify(answer, result_host, atol=)`` with ``answer`` and ``atol``; ``defines``: Kernel Tuner's
    ``#define`` values given as functions of a configuration (its values), added to each compile;
    ``measured``: called with each configuration's values (a float or text parameter's own value) and what
    was measured (``time``, ``times``, ``compile_ms``, ``metrics``, ``objective``), or ``error`` for a
    configuration its check refused; ``grid``: the launch grid of a configuration (its values), where the
    caller gave Kernel Tuner's ``grid_div_*`` or ``problem_size`` as functions (``ExpressionError`` where
    it has none)."""

    arrays: Mapping[int, Any] = field(default_factory=dict)
    verify: Callable[..., Any] | None = None
    answer: Sequence[Any] | None = None
    atol: float | None = None
    defines: Mapping[str, Callable[[dict[str, Any]], Any]] = field(default_factory=dict)
    measured: Callable[[dict[str, Any], dict[str, Any]], None] | None = None
    grid: Callable[[dict[str, Any]], tuple[int, int, int]] | None = None


_ATTACHED: dict[Path, Attached] = {}


def key(spec_path: str | Path) -> Path:
    return Path(spec_path).expanduser().resolve()


@contextmanager
def attached(spec_path: str | Path, what: Attached) -> Iterator[None]:
    """``what`` is the workload's of ``spec_path`` built in this process while the block runs."""
    where = key(spec_path)
    _ATTACHED[where] = what
    try:
        yield
    finally:
        _ATTACHED.pop(where, None)


def attached_to(spec_key: Path) -> Attached | None:
    """What is attached to the spec whose :func:`key` is ``spec_key`` (None: nothing, as on a worker)."""
    return _ATTACHED.get(spec_key)
