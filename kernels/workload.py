"""The interface between what runs on a device (``kernels``) and what plans and learns (``pipeline``).

A workload is one kernel set on one case and size, bound to a backend: a subclass of :class:`Workload`, whose
methods and declared :class:`Capabilities` are everything the pipeline may ask of it. Which name a sweep spec
may give a workload is the pipeline's registry (``pipeline/store/workloads.py``); writing one is
``docs/workloads.md``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .space import Space


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


@dataclass(frozen=True)
class Capabilities:
    """What a workload class declares it can do or needs, known before anything is built (a sweep's plan, on
    the login node). The defaults say "this workload does not"."""

    gpu_only: bool = False  # no numpy backend: a sweep refuses it where no GPU is visible
    path_options: tuple[str, ...] = ()  # options naming a file, given relative to the sweep spec
    # its options name a kernel spec (``kernels/kernel/``): the sweep pins the file to its digest and allows
    # the Python it names (``kernels.kernel.options``), Kernel Tuner can run its source live (``kt:``
    # strategies), and its tuning table exports as a C header
    kernel_spec: bool = False
    # its answers are recorded, not measured on the device it runs on (the ``replay`` workload): the host's
    # copy bandwidth is not measured for it (a quarter of a second on the CPU), its rows' is null
    recorded: bool = False


class Workload(ABC):
    """One kernel set on one case and size, bound to a backend: what the pipeline measures.

    A workload implements the four abstract methods. What else it can do is declared in ``capabilities``,
    and the optional methods below have defaults that say "this workload does not": the pipeline asks every
    workload the same questions and never probes for a method. ``check_arguments`` and ``capabilities``
    answer before anything is built; instance methods answer on a worker.
    """

    name: str
    case: str
    size: tuple[int, ...]

    capabilities: ClassVar[Capabilities] = Capabilities()

    @classmethod
    def check_arguments(cls, case: str, size: Any, **options: Any) -> None:
        """Refuse an unknown case, size or option (``WorkloadError`` naming the field) without building
        anything, so a spec's mistake is found before a cluster starts. Default: nothing to check."""
        return None

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
