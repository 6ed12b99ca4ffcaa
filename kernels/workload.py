"""The interface between what runs on a device (``kernels``) and what plans and learns (``pipeline``).

A workload is one kernel set on one case and size, bound to a backend: a subclass of :class:`Workload`, whose
methods and class attributes are everything the pipeline may ask of it. The registry below names the three
shipped here; the pipeline adds its own (recorded-data replays) and a user's (``module:factory``).
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

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


Config = Mapping[str, Any]


class Workload(ABC):
    """One kernel set on one case and size, bound to a backend: what the pipeline measures.

    A workload implements the four abstract methods. What else it can do is declared here, with defaults
    that say "this workload does not": the pipeline asks every workload the same questions and never probes
    for a method. Class attributes and class methods answer before anything is built (a sweep's plan, on the
    login node); instance methods answer on a worker.
    """

    name: str
    case: str
    size: tuple[int, ...]

    gpu_only: ClassVar[bool] = False  # no numpy backend: a sweep refuses it where no GPU is visible
    path_options: ClassVar[tuple[str, ...]] = ()  # options naming a file, given relative to the sweep spec
    # runs a user's CUDA source from a kernel spec: Kernel Tuner can run it live (``kt:`` strategies) and its
    # tuned values export as a C header
    from_kernel_spec: ClassVar[bool] = False

    @classmethod
    def check_arguments(cls, case: str, size: Any, **options: Any) -> None:
        """Refuse an unknown case, size or option (``WorkloadError`` naming the field) without building
        anything, so a spec's mistake is found before a cluster starts. Default: nothing to check."""
        return None

    @classmethod
    def code_references(cls, **options: Any) -> list[tuple[str, str]]:
        """(field, module:function) of Python code the options name, which the sweep allows as it allows
        a ``module:factory`` workload. Default: none."""
        return []

    @classmethod
    def pin(cls, **options: Any) -> dict[str, Any]:
        """``options`` with what pins the files they name to their checked content (a kernel spec's digest),
        which the workers verify before they compile or import anything. Default: no files, unchanged."""
        return dict(options)

    @abstractmethod
    def space(self) -> Space: ...

    @abstractmethod
    def run(self, config: Config, repeats: int) -> Timing: ...

    @abstractmethod
    def check(self, config: Config) -> Check: ...

    @abstractmethod
    def describe(self) -> dict[str, Any]: ...

    def check_default(self) -> None:
        """Raise ``WorkloadError`` (one line) where the default configuration cannot compile or launch (a
        user's kernel), so a sweep stops before it plans. Default: the default always runs."""
        return None

    def candidates(self) -> list[dict[str, Any]] | None:
        """A fixed pool a search chooses from (a recorded dataset's rows); None: the space's own."""
        return None

    def answerable(self, config: Config) -> bool:
        """Whether ``config`` can be measured beyond the space's constraints (a recorded dataset answers only
        its rows). Default: every valid configuration."""
        return True

    def compile_ahead(self, configs: Sequence[Config]) -> int:
        """Start compiling these configurations while others run; returns how many it started. Default:
        nothing compiles per configuration."""
        return 0

    def take_compile_ms(self) -> float | None:
        """Compile time spent since the last call (outside the timed region); None: never compiles per
        configuration."""
        return None

    def kernel_tuner_arguments(self) -> dict[str, Any] | None:
        """What Kernel Tuner's ``tune_kernel`` needs to run this workload's source (``from_kernel_spec``
        workloads); None for the others."""
        return None


class WorkloadError(ValueError):
    """A workload, case, size or option that does not exist; ``field`` names which, for the message."""

    def __init__(self, message: str, field: str = "workload"):
        super().__init__(message)
        # a field named after a user's key (``options.scheme.<key>``) shows that key escaped, so a line
        # break or a control character in it never splits the one-line message
        self.field = "".join(c if c.isprintable() else repr(c)[1:-1] for c in field)


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


# The registry: name -> the module that defines the workload's class and its ``make_workload`` factory, as
# lazy "module:Class" strings, so this module stays import-light (a workload's CuPy or numpy code loads only
# when that workload is asked for).
_WORKLOADS = {
    "cfd": "launchtune.kernels.cfd.workload:CfdWorkload",
    "tridiag": "launchtune.kernels.tridiag.workload:TridiagWorkload",
    "kernel": "launchtune.kernels.kernel.workload:KernelWorkload",
}


def workload_names() -> list[str]:
    return sorted(_WORKLOADS)


def workload_class(name: str) -> type[Workload]:
    """The class of a registered workload (``WorkloadError`` for an unknown name)."""
    if name not in _WORKLOADS:
        raise WorkloadError(f"unknown workload {name!r}: choose one of {', '.join(workload_names())}")
    module_name, cls = _WORKLOADS[name].split(":")
    return getattr(importlib.import_module(module_name), cls)


def declared(name: str) -> type[Workload]:
    """What a workload named in a spec declares: its class where registered, else the base class's
    defaults (``replay``, an entry point or a ``module:factory`` workload declare nothing up front)."""
    return workload_class(name) if name in _WORKLOADS else Workload


def check_arguments(name: str, case: str, size: str, options: Mapping[str, Any]) -> None:
    """Refuse an unknown workload, case, size or option of a registered workload without building anything
    (``WorkloadError`` naming the field)."""
    workload_class(name).check_arguments(case, size, **options)


def pin_options(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with what pins the files they name to their checked content (``Workload.pin``), added after
    ``check_arguments`` passed: the workers verify it before they compile or import anything."""
    return declared(name).pin(**options)


def code_references(name: str, options: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, module:function) of Python code a registered workload's options name; empty for others."""
    return declared(name).code_references(**options)


def make_workload(
    name: str, case: str, size: str | tuple[int, ...], backend: str = "auto", **options: Any
) -> Workload:
    """Build and prepare a workload: ``make_workload("cfd", "inlet", "208x64", "numpy")``."""
    module = importlib.import_module(workload_class(name).__module__)
    return module.make_workload(case=case, size=size, backend=backend, **options)
