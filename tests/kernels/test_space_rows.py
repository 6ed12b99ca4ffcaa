"""Spaces enumerated and sampled a chunk at a time on arrays (``Space.chunks``, ``valid_rows``) give exactly
what the one-configuration path gives (``decode`` and ``is_valid`` of every combination), on seeded random
spaces whose restrictions are spec expressions, Python functions, or both; and expressions on arrays
(``kernels.kernel.arrays``) answer what the one-value evaluator answers, or decline."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from launchtune.kernels import space as space_module
from launchtune.kernels.kernel.expressions import ExpressionError, parse
from launchtune.kernels.space import Constraint, Param, Space, listed_rows

OPS = ["+", "-", "*", "/", "//", "%", "**"]
COMPARE = ["<", "<=", ">", ">=", "==", "!="]


def _expr(rng: random.Random, names: list[str], depth: int = 0) -> str:
    """A random expression of the spec language over ``names`` (numbers, arithmetic, comparisons, and/or/not,
    a if c else b, min/max, in a list)."""
    leaf = depth >= 3 or rng.random() < 0.3
    if leaf:
        return (
            rng.choice(names) if rng.random() < 0.7 else rng.choice(["0", "1", "2", "3", "-2", "2.5", "True"])
        )
    kind = rng.random()
    sub = lambda: _expr(rng, names, depth + 1)  # noqa: E731
    if kind < 0.35:
        op = rng.choice(OPS[:6] if rng.random() < 0.9 else OPS)
        return f"({sub()} {op} {sub()})"
    if kind < 0.6:
        ops = rng.sample(COMPARE, rng.choice([1, 1, 2]))
        return "(" + sub() + "".join(f" {o} {sub()}" for o in ops) + ")"
    if kind < 0.72:
        return f"({sub()} {rng.choice(['and', 'or'])} {sub()})"
    if kind < 0.78:
        return f"(not {sub()})"
    if kind < 0.86:
        return f"({sub()} if {sub()} else {sub()})"
    if kind < 0.93:
        return f"{rng.choice(['min', 'max'])}({sub()}, {sub()})"
    return f"({sub()} {rng.choice(['in', 'not in'])} [{sub()}, {rng.randint(-2, 8)}])"


def _one_by_one(expr, values: dict) -> bool:
    try:
        return bool(expr(values))
    except ExpressionError:
        return False


def test_expressions_on_arrays_answer_what_one_value_at_a_time_answers():
    rng = random.Random(53)
    names = ["a", "b", "c"]
    grid = np.array([(a, b, c) for a in range(-3, 5) for b in (-2, 0, 1, 3, 8) for c in (0, 1, 2, 7)])
    columns = {n: grid[:, j] for j, n in enumerate(names)}
    answered = 0
    for _ in range(400):
        expr = parse(_expr(rng, names), names, "test")
        mask = expr.truth_of_rows(columns, len(grid))
        if mask is None:
            continue
        answered += 1
        expected = [_one_by_one(expr, dict(zip(names, map(int, row), strict=True))) for row in grid]
        assert mask.tolist() == expected, expr.text
    assert answered >= 300  # most expressions are answered on arrays (the rest decline, never guess)


@pytest.mark.parametrize(
    "text",
    [
        "a / c > 1",  # division by zero: the row is refused, as one at a time
        "c != 0 and a % c == 1",  # ... unless Python never evaluates it
        "a // c if c else a",
        "a ** b > 3",
        "min(a, b, c) < max(a, 2)",
        "a in [1, 2, b] < 5",
        "1 < a <= b * 2 != c",
    ],
)
def test_forms_with_errors_and_short_circuits_match(text):
    names = ["a", "b", "c"]
    grid = np.array([(a, b, c) for a in range(-3, 5) for b in range(0, 4) for c in (0, 1, 2)])
    expr = parse(text, names, "test")
    mask = expr.truth_of_rows({n: grid[:, j] for j, n in enumerate(names)}, len(grid))
    assert mask is not None
    assert mask.tolist() == [_one_by_one(expr, dict(zip(names, map(int, r), strict=True))) for r in grid]


def test_integers_beyond_exact_floats_and_text_decline():
    huge = np.array([2**60, 3])
    assert parse("a * 4 > 0", ["a"], "t").truth_of_rows({"a": huge}, 2) is None
    assert parse("a == 'x'", ["a"], "t").truth_of_rows({"a": np.array([1, 2])}, 2) is None


def _random_space(seed: int) -> Space:
    rng = random.Random(seed)
    k = rng.randint(2, 5)
    names = [f"p{j}" for j in range(k)]
    params = tuple(Param(n, tuple(sorted(rng.sample(range(-4, 40), rng.randint(1, 6))))) for n in names)
    rules = []
    for i in range(rng.randint(1, 4)):
        expr = parse(_expr(rng, names), names, f"r{i}")

        def holds(c, expr=expr):
            return _one_by_one(expr, c)

        def rows(cols, expr=expr):
            n = len(next(iter(cols.values())))
            return expr.truth_of_rows({m: cols[m] for m in expr.names}, n)

        reads = tuple(n for n in names if n in expr.names)
        rules.append(Constraint(expr.text, holds, rows if rng.random() < 0.8 else None, reads))
    if rng.random() < 0.5:  # a Python function of the whole configuration, asked one row at a time
        rules.append(Constraint("odd sum", lambda c: sum(c.values()) % 2 == 1))
    # the default need not obey: build without constraints, then with them and a default that does
    bare = Space(params, {p.name: p.values[0] for p in params})
    valid = [bare.decode(i) for i in range(bare.cardinality)]
    valid = [c for c in valid if all(r.holds(c) for r in rules)]
    default = valid[0] if valid else None
    if default is None:
        return bare
    return Space(params, default, tuple(rules))


def _reference(space: Space) -> list[dict]:
    return [space.decode(i) for i in range(space.cardinality) if space.is_valid(space.decode(i))]


@pytest.mark.parametrize("seed", range(60))
def test_random_spaces_enumerate_exactly_as_one_by_one(seed, monkeypatch):
    monkeypatch.setattr(space_module, "CHUNK", 7)  # many small chunks and split tables
    space = _random_space(seed)
    expected = _reference(space)
    assert list(space.grid()) == expected  # the same configurations in the same (product) order
    rows = space.rows()
    assert rows.tolist() == [[c[n] for n in space.names] for c in expected]
    product = space.decode_rows(np.arange(space.cardinality))
    assert space.valid_rows(product).tolist() == [
        space.is_valid(space.decode(i)) for i in range(len(product))
    ]


@pytest.mark.parametrize("seed", range(20))
def test_random_spaces_sample_exactly_as_one_by_one(seed):
    space = _random_space(seed)
    n = 5
    order = np.random.default_rng(seed).permutation(space.cardinality)
    expected = [space.decode(int(i)) for i in order if space.is_valid(space.decode(int(i)))][:n]
    assert space.sample(n, seed=seed) == expected


def test_large_space_sample_checks_constraints_on_arrays_as_one_by_one():
    params = tuple(Param(f"k{i}", tuple(range(1, 11))) for i in range(8))  # 10^8 combinations
    expr = parse("k0 * k1 <= 20 and k2 % 2 == 0", [p.name for p in params], "r")

    def rows(cols):
        return expr.truth_of_rows({m: cols[m] for m in expr.names}, len(cols["k0"]))

    with_rows = Space(params, {p.name: 2 for p in params}, (Constraint("r", lambda c: bool(expr(c)), rows),))
    without = Space(params, {p.name: 2 for p in params}, (Constraint("r", lambda c: bool(expr(c))),))
    assert with_rows.sample(300, seed=5) == without.sample(300, seed=5)


def test_enumeration_of_a_1e8_product_is_bounded_and_exact():
    params = tuple(Param(f"k{i}", tuple(range(1, 11))) for i in range(8))  # 10^8 combinations
    names = [p.name for p in params]
    expr = parse("k0 * k1 * k2 == 1 and k3 + k4 <= 3 and k5 == k6", names, "r")
    rule = Constraint(
        "r",
        lambda c: bool(expr(c)),
        lambda cols: expr.truth_of_rows({m: cols[m] for m in expr.names}, len(cols["k0"])),
        tuple(expr.names),
    )
    space = Space(params, {n: 1 for n in names}, (rule,))
    rows = space.rows()
    assert len(rows) == 1 * 3 * 10 * 10  # k0..k2 = 1; (k3, k4) in 3 pairs; k5 = k6 in 10; k7 any
    assert all(space.is_valid(dict(zip(names, r, strict=True))) for r in rows.tolist())
    assert math.prod(len(p.values) for p in params) == 10**8


def test_listed_rows_is_membership():
    params = (Param("a", (1, 2, 3)), Param("b", (10, 20)))
    allowed = np.array([[1, 20], [3, 10]])
    rule = listed_rows(params, allowed)
    cols = {"a": np.array([1, 1, 3, 2]), "b": np.array([10, 20, 10, 20])}
    assert rule(cols).tolist() == [False, True, True, False]
    assert rule({"a": np.array([5]), "b": np.array([10])}) is None  # off the lists: asked row by row


def _without_rows(space: Space) -> Space:
    from dataclasses import replace

    bare = tuple(replace(c, rows=None, reads=None) for c in space.constraints)
    return Space(space.params, space.default, bare, space.name, space.inactive)


def test_the_workloads_rules_on_arrays_answer_as_their_functions():
    from launchtune.kernels.cfd.launch_space import build_space
    from launchtune.kernels.tridiag.workload import TridiagWorkload

    tridiag = TridiagWorkload("random", 1000, backend="numpy").space()
    assert all(c.rows is not None for c in tridiag.constraints)
    assert list(tridiag.grid()) == _reference(tridiag) == list(_without_rows(tridiag).grid())
    kernels = ["xi_limiter", "eta_limiter", "xi_flux", "eta_flux", "source", "rhs", "update"]
    cfd = build_space(dict.fromkeys(kernels, 1000), dict.fromkeys(kernels, 256))
    assert all(c.rows is not None for c in cfd.constraints)
    assert cfd.sample(2000, 3) == _without_rows(cfd).sample(2000, 3)
