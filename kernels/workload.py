"""The interface between what runs on a device (``kernels``) and what plans and learns (``pipeline``).

A workload is one kernel set on one case and size, bound to a backend. The pipeline only ever calls
``space()``, ``run()``, ``check()`` and ``describe()``; everything else is the workload's own business.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from launchtune.kernels.space import Space


@dataclass(frozen=True)
class Timing:
    """Median milliseconds per kernel and for the whole measured region, after warm-up."""

    kernels: dict[str, float]
    total: float
    repeats: int
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """Whether a configuration computes the same answer as the default configuration."""

    ok: bool
    reason: str = ""


@runtime_checkable
class Workload(Protocol):
    name: str
    case: str
    size: tuple[int, ...]

    def space(self) -> Space: ...

    def run(self, config: Mapping[str, int], repeats: int) -> Timing: ...

    def check(self, config: Mapping[str, int]) -> Check: ...

    def describe(self) -> dict[str, Any]: ...


class WorkloadError(ValueError):
    """A workload, case, size or option that does not exist; ``field`` names which, for the message."""

    def __init__(self, message: str, field: str = "workload"):
        super().__init__(message)
        self.field = field


# The largest seed every library we seed takes: scikit-learn's ``random_state`` and numpy's legacy
# ``RandomState`` accept 0 .. 2**32 - 1 (numpy's ``default_rng`` takes more, but one rule for all seeds).
SEED_MAX = 2**32 - 1


def integer_option(options: Mapping[str, Any], name: str, default: int, minimum: int, maximum: int) -> int:
    """``options[name]`` (or ``default``) as an integer in ``[minimum, maximum]``, else ``WorkloadError``
    naming ``options.<name>``: the one rule for a workload option that sizes work or seeds a generator."""
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise WorkloadError(
            f"must be an integer from {minimum:,} to {maximum:,} (got {value!r})"[:300], f"options.{name}"
        )
    return value


def number_option(
    options: Mapping[str, Any], name: str, default: float, minimum: float, maximum: float
) -> float:
    """``options[name]`` (or ``default``) as a finite real number in ``[minimum, maximum]`` (NaN and
    infinities refused), else ``WorkloadError`` naming ``options.<name>``."""
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not minimum <= value <= maximum:
        raise WorkloadError(
            f"must be a number from {minimum:g} to {maximum:g} (got {value!r})"[:300], f"options.{name}"
        )
    return float(value)


# Lazy "module:factory" strings keep this module import-light: a workload's CuPy or numpy code loads only when
# that workload is asked for.
_FACTORIES = {
    "cfd": "launchtune.kernels.cfd.workload:make_workload",
    "tridiag": "launchtune.kernels.tridiag.workload:make_workload",
    "kernel": "launchtune.kernels.custom.workload:make_workload",
}

# Options that name a file: a sweep spec gives them relative to itself (pipeline resolves them).
PATH_OPTIONS: dict[str, tuple[str, ...]] = {"kernel": ("spec",)}
# Workloads that run only on a GPU (no numpy backend): a sweep refuses them where none is visible.
GPU_ONLY = frozenset({"kernel"})


def workload_names() -> list[str]:
    return sorted(_FACTORIES)


def check_arguments(name: str, case: str, size: str, options: Mapping[str, Any]) -> None:
    """Refuse an unknown workload, case, size or option of a registered workload without building anything
    (``WorkloadError`` naming the field), so a spec's mistake is found before a cluster starts. Each workload
    module checks its own arguments in ``check_arguments(case, size, **options)``."""
    if name not in _FACTORIES:
        raise WorkloadError(f"unknown workload {name!r}: choose one of {', '.join(workload_names())}")
    module_name, _ = _FACTORIES[name].split(":")
    importlib.import_module(module_name).check_arguments(case, size, **options)


def pin_options(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with what pins the files they name to their checked content (the ``kernel`` workload's
    spec digest), added after ``check_arguments`` passed: the workers verify it before they compile or
    import anything. Unchanged for workloads that read no user files."""
    if name not in _FACTORIES:
        return dict(options)
    module = importlib.import_module(_FACTORIES[name].split(":")[0])
    pin = getattr(module, "pin", None)
    return pin(**options) if pin is not None else dict(options)


def code_references(name: str, options: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, module:function) of Python code a registered workload's options name (the ``kernel``
    workload's spec may name a reference and an arguments factory): the sweep allows each as it allows a
    ``module:factory`` workload. Empty for workloads that name none."""
    if name not in _FACTORIES:
        return []
    module = importlib.import_module(_FACTORIES[name].split(":")[0])
    refs = getattr(module, "code_references", None)
    return list(refs(**options)) if refs is not None else []


def make_workload(
    name: str, case: str, size: str | tuple[int, ...], backend: str = "auto", **options: Any
) -> Workload:
    """Build and prepare a workload: ``make_workload("cfd", "inlet", "208x64", "numpy")``."""
    if name not in _FACTORIES:
        raise WorkloadError(f"unknown workload {name!r}: choose one of {', '.join(workload_names())}")
    module_name, factory = _FACTORIES[name].split(":")
    module = importlib.import_module(module_name)
    return getattr(module, factory)(case=case, size=size, backend=backend, **options)
