"""A spec expression evaluated on columns of many configurations at once (numpy), with exactly the answers
the one-configuration evaluator of ``expressions`` gives, or no answer at all.

Why: a space's restrictions decide which of its product's combinations are valid, and asking Python once per
combination took 25 s for a 3.2-million-combination stencil space (issue 53). Here one expression is one numpy
operation per node over a chunk of combinations.

Exactness is the contract, so every difference between Python's numbers and numpy's is either reproduced or
refused. Reproduced: a division, floor division or modulo by zero raises in Python, so it is an *error* of the
row (the restriction then excludes it, as ``KernelSpec.space`` does with an ``ExpressionError``); ``and``,
``or``, ``a if c else b`` and chained comparisons skip what Python does not evaluate, so an error there does
not count; booleans count as 0 and 1 in arithmetic. Refused (``Inexact``, raised while evaluating: the caller
asks one configuration at a time instead): integers beyond 2**53, where numpy's int64 could wrap and int to
float stops being exact; a power with a float or negative operand; a floor division or modulo of a float that
is not finite; NaN where ``min``, ``max`` or ``in`` would meet it. Refused when building
(``NotVectorised``): text constants and any node the array form does not know.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

EXACT = 2**53  # integers up to this magnitude are exact as float64 and cannot overflow int64 when added
MAX_EXPONENT = 4096  # as expressions.MAX_EXPONENT: a larger exponent is an error of the row there

# a node's value per row and whether evaluating it raised for that row
Result = tuple[np.ndarray, np.ndarray]
ArrayEvaluator = Callable[[Mapping[str, np.ndarray]], Result]


class NotVectorised(Exception):
    """The expression holds something the array form does not compute (text, an unknown node)."""


class Inexact(Exception):
    """These values would not give the one-at-a-time answers on arrays (an integer beyond 2**53, ...)."""


def _num(x: np.ndarray) -> np.ndarray:
    """Booleans as the integers Python's arithmetic sees."""
    return x.astype(np.int64) if x.dtype.kind == "b" else x


def _exact(x: np.ndarray) -> np.ndarray:
    """``x`` where its integers are within ``EXACT``; else ``Inexact``."""
    if x.dtype.kind in "iu" and x.size and int(np.abs(x).max()) > EXACT:
        raise Inexact("an integer beyond 2**53")
    return x


def _truth(x: np.ndarray) -> np.ndarray:
    return x if x.dtype.kind == "b" else x != 0  # NaN is true, as bool(nan)


def _no_nan(*xs: np.ndarray) -> None:
    for x in xs:
        if x.dtype.kind == "f" and np.isnan(x).any():
            raise Inexact("NaN")


def check_columns(columns: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The columns an expression reads, as numeric arrays within the exact range; ``Inexact`` otherwise."""
    out = {}
    for name, col in columns.items():
        col = np.asarray(col)
        if col.dtype.kind not in "biuf":
            raise Inexact(f"{name} is not numeric")
        out[name] = _exact(col.astype(np.int64) if col.dtype.kind == "u" else col)
    return out


def _arith(op: type, a: np.ndarray, b: np.ndarray) -> Result:
    """``a op b`` elementwise with Python's results; the error mask marks a division by zero."""
    a, b = _num(a), _num(b)
    no_error = np.zeros(np.broadcast(a, b).shape, dtype=bool)
    floats = a.dtype.kind == "f" or b.dtype.kind == "f"
    if op is ast.Add:
        return _exact(a + b), no_error
    if op is ast.Sub:
        return _exact(a - b), no_error
    if op is ast.Mult:
        if not floats and a.size and b.size and int(np.abs(a).max()) * int(np.abs(b).max()) > EXACT:
            raise Inexact("a product beyond 2**53")
        return _exact(a * b), no_error
    if op is ast.Pow:
        if floats:
            raise Inexact("a power of floats")
        if b.size and int(b.min()) < 0:
            raise Inexact("a negative exponent")
        error = np.broadcast_to(b > MAX_EXPONENT, no_error.shape)
        safe_b = np.where(error, 0, b)
        big = np.abs(a.astype(np.float64)) ** safe_b.astype(np.float64)
        if big.size and float(big.max()) > EXACT:
            raise Inexact("a power beyond 2**53")
        return np.power(a, safe_b), error
    zero = np.broadcast_to(b == 0, no_error.shape)
    safe = np.where(b == 0, 1, b)
    if op is ast.Div:
        return np.true_divide(a, safe), zero
    if floats and not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise Inexact("floor division or modulo of a float that is not finite")
    if op is ast.FloorDiv:
        return _exact(np.floor_divide(a, safe)), zero
    if op is ast.Mod:
        return _exact(np.remainder(a, safe)), zero
    raise NotVectorised(op.__name__)


_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
}


def build(node: ast.AST) -> ArrayEvaluator:
    """The array evaluator of a checked expression tree (``expressions.parse`` has refused what the language
    does not allow); ``NotVectorised`` for a node this form does not compute."""
    if isinstance(node, ast.Constant):
        return _constant(node.value)
    if isinstance(node, ast.Name):
        name = node.id
        return lambda v: (v[name], np.zeros((), dtype=bool))
    if isinstance(node, ast.BinOp):
        left, right, op = build(node.left), build(node.right), type(node.op)
        if op not in (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow):
            raise NotVectorised(op.__name__)

        def binary(v: Mapping[str, np.ndarray]) -> Result:
            (a, ea), (b, eb) = left(v), right(v)
            value, error = _arith(op, a, b)
            return value, ea | eb | error

        return binary
    if isinstance(node, ast.UnaryOp):
        operand, unary_op = build(node.operand), type(node.op)
        if unary_op not in (ast.Not, ast.USub, ast.UAdd):
            raise NotVectorised(unary_op.__name__)

        def unary(v: Mapping[str, np.ndarray]) -> Result:
            x, e = operand(v)
            if unary_op is ast.Not:
                return ~_truth(x), e
            return (-_num(x) if unary_op is ast.USub else _num(x)), e

        return unary
    if isinstance(node, ast.BoolOp):
        return _boolean(node, [build(p) for p in node.values])
    if isinstance(node, ast.Compare):
        return _comparison(node)
    if isinstance(node, ast.IfExp):
        test, body, orelse = build(node.test), build(node.body), build(node.orelse)

        def choose(v: Mapping[str, np.ndarray]) -> Result:
            (t, et), (a, ea), (b, eb) = test(v), body(v), orelse(v)
            which = _truth(t)
            return np.where(which, a, b), et | (which & ea) | (~which & eb)

        return choose
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
        args = [build(a) for a in node.args]
        reduce = np.minimum if node.func.id == "min" else np.maximum

        def extreme(v: Mapping[str, np.ndarray]) -> Result:
            results = [a(v) for a in args]
            _no_nan(*(x for x, _ in results))
            value, error = _num(results[0][0]), results[0][1]
            for x, e in results[1:]:
                value, error = reduce(value, _num(x)), error | e
            return value, error

        return extreme
    raise NotVectorised(type(node).__name__)


def _constant(value: Any) -> ArrayEvaluator:
    """A number or truth value the arrays hold exactly (an integer within 2**53); ``NotVectorised`` else."""
    if isinstance(value, bool):
        constant = np.asarray(value)
    elif isinstance(value, int):
        if abs(value) > EXACT:
            raise NotVectorised("an integer constant beyond 2**53")
        constant = np.asarray(value, dtype=np.int64)
    elif isinstance(value, float):
        constant = np.asarray(value, dtype=np.float64)
    else:
        raise NotVectorised("a text constant")
    return lambda _: (constant, np.zeros((), dtype=bool))


def _boolean(node: ast.BoolOp, parts: list[ArrayEvaluator]) -> ArrayEvaluator:
    """``and``/``or`` row by row as Python evaluates them one at a time."""
    conjunction = isinstance(node.op, ast.And)

    def boolean(v: Mapping[str, np.ndarray]) -> Result:
        # Python returns the first operand that decides (false for and, true for or), else the last;
        # an operand after the deciding one is never evaluated, so its errors do not count
        value, error = parts[0](v)
        going = _truth(value) if conjunction else ~_truth(value)
        for part in parts[1:]:
            x, e = part(v)
            value = np.where(going, x, value)
            error = error | (going & e)
            going = going & (_truth(x) if conjunction else ~_truth(x))
        return value, error

    return boolean


def _comparison(node: ast.Compare) -> ArrayEvaluator:
    """A chained comparison row by row (``in``/``not in`` over a list written out), as Python chains it."""
    first = build(node.left)
    steps: list[tuple[str, Any, Any]] = []
    for op_node, right_node in zip(node.ops, node.comparators, strict=True):
        if isinstance(op_node, ast.In | ast.NotIn):
            assert isinstance(right_node, ast.List | ast.Tuple)  # parse allows nothing else right of in
            items = [build(e) for e in right_node.elts]
            steps.append(("in", isinstance(op_node, ast.NotIn), items))
        else:
            steps.append(("cmp", _COMPARE[type(op_node)], build(right_node)))

    def chained(v: Mapping[str, np.ndarray]) -> Result:
        left, error = first(v)
        going = np.ones(np.shape(left), dtype=bool)  # rows whose comparisons so far all held
        for kind, how, right in steps:
            if kind == "in":
                found = np.zeros((), dtype=bool)
                for item in right:  # the list is built whole: every item is evaluated
                    x, e = item(v)
                    _no_nan(left, x)
                    found = found | (left == x)
                    error = error | (going & e)
                going = going & (found != how)
                continue  # Python keeps the left operand after an ``in`` (expressions.chained)
            x, e = right(v)
            error = error | (going & e)
            going = going & how(left, x)
            left = x
        return going, error

    return chained


def truth(evaluate: ArrayEvaluator, columns: Mapping[str, np.ndarray], rows: int) -> np.ndarray:
    """Per row, whether the expression is true where it evaluates without error (an error: False);
    ``Inexact`` where the arrays cannot give the one-at-a-time answer."""
    value, error = evaluate(check_columns(columns))
    return np.broadcast_to(_truth(value) & ~error, (rows,)).copy()
