"""Launch spaces: named discrete parameters, a default configuration, constraints and seeded samplers."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

Config = dict[str, int]


class SpaceError(ValueError):
    """A configuration names a parameter or value the space does not hold."""


@dataclass(frozen=True)
class Param:
    name: str
    values: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.values:
            raise SpaceError(f"parameter {self.name!r} has no values")
        if len(set(self.values)) != len(self.values):
            raise SpaceError(f"parameter {self.name!r} lists a value twice")


@dataclass(frozen=True)
class Constraint:
    """A rule every valid configuration obeys; ``why`` is the message shown when it does not."""

    why: str
    holds: Callable[[Mapping[str, int]], bool]


@dataclass(frozen=True)
class Inactive:
    """Where ``when`` takes one of ``values``, the parameters ``params`` are not used by the kernel that runs
    (a conditional space written as one product: the fused CFD levels ignore the seven kernels' launches).
    Models are told, so their values there are not mistaken for signal."""

    when: str
    values: tuple[int, ...]
    params: tuple[str, ...]

    def as_list(self) -> list:
        return [self.when, list(self.values), list(self.params)]


@dataclass(frozen=True)
class Space:
    """The Cartesian product of ``params`` minus configurations that break a constraint.

    The default configuration (what a user gets without tuning, e.g. one thread per cell) need not lie on the
    value lists: it is always a valid configuration of its space, so it can be measured beside the samples,
    and each parameter may take its default value beside its listed ones (one kernel tuned, others default).
    """

    params: tuple[Param, ...]
    default: Config
    constraints: tuple[Constraint, ...] = ()
    name: str = ""
    inactive: tuple[Inactive, ...] = ()
    _index: dict[str, Param] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {p.name: p for p in self.params})
        if len(self._index) != len(self.params):
            raise SpaceError("two parameters share a name")
        if sorted(self.default) != sorted(self._index):
            raise SpaceError("the default configuration must set every parameter exactly once")
        self.validate(self.default)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    @property
    def cardinality(self) -> int:
        """Size of the Cartesian product (before constraints)."""
        return math.prod(len(p.values) for p in self.params)

    def __getitem__(self, name: str) -> Param:
        return self._index[name]

    def violations(self, config: Mapping[str, int]) -> list[str]:
        """Every reason ``config`` is not a member of this space (empty when it is)."""
        problems = []
        missing = [n for n in self.names if n not in config]
        extra = [n for n in config if n not in self._index]
        if missing:
            problems.append(f"missing parameters: {', '.join(missing)}")
        if extra:
            problems.append(f"unknown parameters: {', '.join(extra)}")
        for name in self.names:
            # Each parameter may also take its own default value, so one kernel can be tuned while the others
            # stay at their defaults (the per-kernel sweeps of the pipeline and the runtime autotuner).
            value = int(config[name]) if name in config else None
            if name in config and value not in self._index[name].values and value != self.default.get(name):
                problems.append(f"{name}={config[name]} is not one of {list(self._index[name].values)}")
        if not problems:
            problems += [c.why for c in self.constraints if not c.holds(config)]
        return problems

    def validate(self, config: Mapping[str, int]) -> Config:
        problems = self.violations(config)
        if problems:
            raise SpaceError("; ".join(problems))
        return {n: int(config[n]) for n in self.names}

    def is_valid(self, config: Mapping[str, int]) -> bool:
        return not self.violations(config)

    def decode(self, index: int) -> Config:
        """The configuration at position ``index`` of the product in mixed radix (last parameter fastest)."""
        config = {}
        for p in reversed(self.params):
            index, digit = divmod(index, len(p.values))
            config[p.name] = p.values[digit]
        return {n: config[n] for n in self.names}

    def grid(self) -> Iterator[Config]:
        """Every valid configuration, in product order."""
        for i in range(self.cardinality):
            config = self.decode(i)
            if self.is_valid(config):
                yield config

    def sample(self, n: int, seed: int) -> list[Config]:
        """``n`` distinct valid configurations drawn uniformly with ``seed`` (fewer only if the space is
        smaller).

        Small spaces are drawn without replacement from the product; large ones (the paper's 3.6e14) by
        drawing each parameter independently and discarding repeats and constraint failures.
        """
        if n < 0:
            raise SpaceError("sample count must be >= 0")
        rng = np.random.default_rng(seed)
        if self.cardinality <= 2_000_000:
            order = rng.permutation(self.cardinality)
            out = []
            for i in order:
                config = self.decode(int(i))
                if self.is_valid(config):
                    out.append(config)
                    if len(out) == n:
                        break
            return out
        # One attempt draws each parameter's index in turn (``rng.integers(len(values))``); the draws of many
        # attempts are taken in one call with an array of bounds, which numpy fills element by element from
        # the same stream (Lemire's method on the bit generator's next 32 bits, per element): the same
        # configurations as one call per parameter, 2 us a call cheaper (issue 18: 10^6 samples were ~80 s
        # of one worker's CPU). A drawn configuration is on the value lists, so only the constraints decide.
        names = self.names
        lens = np.array([len(p.values) for p in self.params], dtype=np.int64)
        values = [np.asarray(p.values, dtype=np.int64) for p in self.params]
        limit = 100 * n + 1000
        seen: set[tuple[int, ...]] = set()
        out = []
        attempts = 0
        while len(out) < n:
            chunk = min(max(1024, 2 * (n - len(out))), limit - attempts + 1)
            index = rng.integers(0, np.tile(lens, chunk)).reshape(chunk, len(lens))
            drawn = np.column_stack([v[index[:, j]] for j, v in enumerate(values)]).tolist()
            for key_list in drawn:
                attempts += 1
                if attempts > limit:
                    raise SpaceError(
                        f"could not draw {n} valid configurations: constraints reject almost all"
                    )
                key = tuple(key_list)
                if key in seen:
                    continue
                config = dict(zip(names, key, strict=True))
                if all(c.holds(config) for c in self.constraints):
                    seen.add(key)
                    out.append(config)
                    if len(out) == n:
                        break
        return out

    def active_key(self, config: Mapping[str, int]) -> tuple[int | None, ...]:
        """``config``'s values in ``names`` order with the parameters it leaves unused (``inactive``) as None:
        two configurations with one key run the same kernels with the same launches."""
        unused = {p for rule in self.inactive if config[rule.when] in rule.values for p in rule.params}
        return tuple(None if n in unused else int(config[n]) for n in self.names)

    def unused_mask(self, X: np.ndarray) -> np.ndarray:
        """Configurations (rows of ``X``, values in ``names`` order) x parameters: True where the row leaves
        the parameter unused (``inactive``); all False without rules. ``active_key`` for many at once."""
        X = np.asarray(X)
        column = {n: j for j, n in enumerate(self.names)}
        out = np.zeros(X.shape, dtype=bool)
        for rule in self.inactive:
            rows = np.isin(X[:, column[rule.when]], rule.values)
            out[np.ix_(rows, [column[p] for p in rule.params])] = True
        return out

    def branch(self, config: Mapping[str, int]) -> tuple[int, ...]:
        """The values of the parameters that decide which others are unused (the ``when`` of ``inactive``):
        the branch of a conditional space ``config`` lies on, e.g. its fusion level; () without rules."""
        deciding = sorted({rule.when for rule in self.inactive})
        return tuple(int(config[n]) for n in deciding)

    def subspace(self, names: Sequence[str]) -> Space:
        """The space over ``names`` only, other parameters fixed at their default (constraints kept)."""
        params = tuple(self._index[n] for n in names)
        fixed = {k: v for k, v in self.default.items() if k not in names}
        constraints = tuple(
            Constraint(c.why, lambda cfg, c=c: c.holds({**fixed, **cfg})) for c in self.constraints
        )
        return Space(
            params, {n: self.default[n] for n in names}, constraints, name=f"{self.name}[{','.join(names)}]"
        )
