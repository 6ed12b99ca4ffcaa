"""Launch spaces: named discrete parameters, a default configuration, constraints and seeded samplers."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

Config = dict[str, int]
# the rule on many configurations at once: one numpy array per parameter (equal lengths, values of
# product rows) -> a bool per row, or None where it cannot answer exactly what ``holds`` would (then each
# row is asked)
RowsRule = Callable[[Mapping[str, np.ndarray]], "np.ndarray | None"]
# Product rows decoded and checked at once (``Space.rows``): 65,536 rows of 10 parameters are 5 MiB of int64,
# so memory stays bounded whatever the product (10^8 combinations are 1,526 chunks).
CHUNK = 1 << 16


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
    rows: RowsRule | None = None  # the same rule on many configurations (optional; see ``RowsRule``)
    # the parameters ``rows`` reads (None: any): enumeration checks the rule as soon as these have values
    reads: tuple[str, ...] | None = None


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

    def decode_rows(self, index: np.ndarray) -> np.ndarray:
        """``decode`` of many positions at once: one row of values (``names`` order) per position."""
        index = np.asarray(index, dtype=np.int64)
        out = np.empty((len(index), len(self.params)), dtype=np.int64)
        for j in range(len(self.params) - 1, -1, -1):
            values = np.asarray(self.params[j].values, dtype=np.int64)
            index, digit = np.divmod(index, len(values))
            out[:, j] = values[digit]
        return out

    def valid_rows(self, rows: np.ndarray) -> np.ndarray:
        """Which rows (values on the value lists, ``names`` order) satisfy every constraint: the rules that
        answer on arrays first, over the whole chunk; the others (``holds``, one row at a time) only on the
        rows still standing. The same answer as ``is_valid`` of each row."""
        rows = np.asarray(rows, dtype=np.int64)
        ok = np.ones(len(rows), dtype=bool)
        later = []
        columns = {n: rows[:, j] for j, n in enumerate(self.names)}
        for c in self.constraints:
            mask = c.rows(columns) if c.rows is not None else None
            if mask is None:
                later.append(c)
            else:
                ok &= np.asarray(mask, dtype=bool)
        if later and ok.any():
            standing = np.flatnonzero(ok)
            names = self.names
            for i, row in zip(standing.tolist(), rows[standing].tolist(), strict=True):
                config = dict(zip(names, row, strict=True))
                ok[i] = all(c.holds(config) for c in later)
        return ok

    def rows(self) -> np.ndarray:
        """Every valid configuration as a row of values (``names`` order), in product order: ``grid`` as one
        array (``chunks``, joined)."""
        parts = list(self.chunks())
        return np.concatenate(parts) if parts else np.empty((0, len(self.params)), dtype=np.int64)

    def grid(self) -> Iterator[Config]:
        """Every valid configuration, in product order (``chunks``, as dicts)."""
        names = self.names
        for chunk in self.chunks():
            for row in chunk.tolist():
                yield dict(zip(names, row, strict=True))

    def chunks(self) -> Iterator[np.ndarray]:
        """The valid configurations in product order, as arrays of rows (values in ``names`` order) of at
        most about ``CHUNK`` rows each.

        The product is built one parameter at a time, as a table of the valid partial rows: each next
        parameter multiplies the table by its values, and every constraint that answers on arrays
        (``Constraint.rows``) is checked as soon as the parameters it ``reads`` have values, so a combination
        refused early is never extended. Rows keep product order (last parameter fastest). A table over
        ``CHUNK`` rows is extended a part at a time, so memory stays bounded whatever the product.
        Constraints without ``rows`` (Python functions of a whole configuration), and a ``rows`` that cannot
        answer for a part, are asked one row at a time at the end, only about the rows the others left.

        Why arrays and not a constraint solver (python-constraint2, as Kernel Tuner 1.5's ``Searchspace``):
        measured in one process on the same spaces (``benchmarks/space_enumeration.py``,
        ``data/space_enumeration/``), this was as fast or faster, gives exactly ``is_valid``'s answers (a
        solver reads the restrictions again, in its own language), and keeps every Python constraint
        working."""
        names, k = self.names, len(self.params)
        values = [np.asarray(p.values, dtype=np.int64) for p in self.params]
        position = {n: j for j, n in enumerate(names)}
        at: list[list[Constraint]] = [[] for _ in range(k)]
        last: list[Constraint] = []
        for c in self.constraints:
            if c.rows is None or k == 0:
                last.append(c)
                continue
            reads = [position[n] for n in (names if c.reads is None else c.reads) if n in position]
            at[max(reads, default=0)].append(c)

        def extend(table: np.ndarray, j: int, deferred: list[Constraint]) -> Iterator[np.ndarray]:
            if j == k:
                yield self._asked_per_row(table, last + deferred)
                return
            vals = values[j]
            step = max(1, CHUNK // len(vals))
            for start in range(0, len(table), step):
                part = table[start : start + step]
                grown = np.empty((len(part) * len(vals), j + 1), dtype=np.int64)
                grown[:, :j] = np.repeat(part, len(vals), axis=0)
                grown[:, j] = np.tile(vals, len(part))
                columns = {names[i]: grown[:, i] for i in range(j + 1)}
                ok = np.ones(len(grown), dtype=bool)
                later = list(deferred)
                for c in at[j]:
                    mask = c.rows(columns) if c.rows is not None else None
                    if mask is None:
                        later.append(c)
                    else:
                        ok &= np.asarray(mask, dtype=bool)
                grown = grown[ok]
                if len(grown):
                    yield from extend(grown, j + 1, later)

        for chunk in extend(np.empty((1, 0), dtype=np.int64), 0, []):
            if len(chunk):
                yield chunk

    def _asked_per_row(self, table: np.ndarray, constraints: Sequence[Constraint]) -> np.ndarray:
        """The rows of ``table`` (whole configurations) that every one of ``constraints`` allows, asked
        through ``holds`` one row at a time."""
        if not constraints or not len(table):
            return table
        names = self.names
        keep: list[bool] = [
            all(c.holds(dict(zip(names, row, strict=True))) for c in constraints) for row in table.tolist()
        ]
        return table[np.asarray(keep, dtype=bool)]

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
            names = self.names
            out: list[Config] = []
            start = 0
            # the permutation's valid configurations in its order, checked a chunk at a time (``valid_rows``)
            while len(out) < n and start < len(order):
                want = max(1024, 4 * (n - len(out)))
                stop = min(len(order), start + min(CHUNK, want))
                part = self.decode_rows(order[start:stop])
                for row in part[self.valid_rows(part)][: n - len(out)].tolist():
                    out.append(dict(zip(names, row, strict=True)))
                start = stop
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
            drawn_rows = np.column_stack([v[index[:, j]] for j, v in enumerate(values)])
            valid = self.valid_rows(drawn_rows).tolist()  # the constraints, a chunk at once
            drawn = drawn_rows.tolist()
            for key_list, ok in zip(drawn, valid, strict=True):
                attempts += 1
                if attempts > limit:
                    raise SpaceError(
                        f"could not draw {n} valid configurations: constraints reject almost all"
                    )
                key = tuple(key_list)
                if key in seen:
                    continue
                if ok:
                    seen.add(key)
                    out.append(dict(zip(names, key, strict=True)))
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
            out[np.ix_(rows, np.array([column[p] for p in rule.params]))] = True
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
            Constraint(
                c.why,
                _holds_with_fixed(c, fixed),
                None if c.rows is None else _with_fixed(c.rows, fixed),
                None if c.reads is None else tuple(n for n in c.reads if n in names),
            )
            for c in self.constraints
        )
        return Space(
            params, {n: self.default[n] for n in names}, constraints, name=f"{self.name}[{','.join(names)}]"
        )


def _holds_with_fixed(c: Constraint, fixed: Mapping[str, int]) -> Callable[[Mapping[str, int]], bool]:
    return lambda cfg: c.holds({**fixed, **cfg})


def _with_fixed(rule: RowsRule, fixed: Mapping[str, int]) -> RowsRule:
    """``rule`` over columns of some parameters, the others held at ``fixed``."""

    def rows(columns: Mapping[str, np.ndarray]) -> np.ndarray | None:
        n = len(next(iter(columns.values()))) if columns else 0
        held = {k: np.full(n, v, dtype=np.int64) for k, v in fixed.items()}
        return rule({**held, **columns})

    return rows


def listed_rows(params: Sequence[Param], allowed: np.ndarray) -> RowsRule:
    """The rule "this row is one of ``allowed``" (rows of values in ``params`` order) on arrays: each row's
    position in the product, looked up among the allowed rows' positions. None (ask each row) where a value is
    off its list or the product's positions do not fit in int64."""
    names = [p.name for p in params]
    sorted_values = [np.sort(np.asarray(p.values, dtype=np.int64)) for p in params]
    dims = tuple(len(v) for v in sorted_values)

    def digits(columns: Sequence[np.ndarray]) -> list[np.ndarray] | None:
        out = []
        for col, values in zip(columns, sorted_values, strict=True):
            col = np.asarray(col, dtype=np.int64)
            at = np.minimum(np.searchsorted(values, col), len(values) - 1)
            if not np.array_equal(values[at], col):
                return None
            out.append(at)
        return out

    if math.prod(dims) >= 2**62:
        return lambda columns: None
    allowed = np.asarray(allowed, dtype=np.int64).reshape(-1, len(names))
    inside = digits(list(allowed.T))
    if inside is None:  # an allowed row off the value lists: only ``holds`` knows it
        return lambda columns: None
    permitted = (
        np.unique(np.ravel_multi_index(tuple(inside), dims)) if len(allowed) else np.empty(0, np.int64)
    )

    def rows(columns: Mapping[str, np.ndarray]) -> np.ndarray | None:
        at = digits([columns[n] for n in names])
        if at is None:
            return None
        return np.isin(np.ravel_multi_index(tuple(at), dims), permitted)

    return rows
