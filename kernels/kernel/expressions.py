"""The expression language of kernel specs: restrictions, grid divisors, argument shapes and values.

A spec is data, often someone else's, so its expressions are never handed to ``eval``. Python's own parser
(``ast``) reads the text; every node of the tree must be on an allow-list (names the spec declares, numbers,
``+ - * / // % **``, comparisons including chained ones, ``in`` / ``not in`` a list or tuple written out,
``and or not``, ``min``/``max``, ``a if c else b``, and short text constants, which only compare);
the tree is then turned into nested closures, so evaluating an expression runs only this module's code.
Size is bounded before and after parsing (characters, nodes, depth) and ``**`` is bounded by the size of its
result, so neither ``((((...))))`` nor ``9**9**9`` can exhaust the stack, the memory or the time.

Python's semantics throughout: ``/`` is true division, ``//`` and ``%`` floor, ``and``/``or`` return an
operand. A name is looked up in the mapping given to the evaluation.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from . import arrays

MAX_CHARS = 1000
MAX_NODES = 300
MAX_DEPTH = 40
# ``a ** b`` is refused where its result would exceed this many bits (an int) or where ``|b|`` exceeds
# MAX_EXPONENT: the bound that keeps ``9**9**9`` from running for hours.
MAX_POWER_BITS = 4096
MAX_EXPONENT = 4096

Number = int | float | bool
Evaluator = Callable[[Mapping[str, Number]], Any]


class ExpressionError(ValueError):
    """An expression outside the language (raised when parsing) or one that cannot be evaluated for some
    values (division by zero, a power too large); the message names where it came from."""


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max}
MAX_TEXT = 200  # characters of a text constant (a string parameter's value, as Kernel Tuner's "float")
MAX_ITEMS = 1000  # items of a list or tuple literal right of ``in``
# told with every refused call, so its message says both what was refused and what is allowed
CALLS_ALLOWED = "the only calls are min(a, b, ...) and max(a, b, ...), of two or more plain arguments"


def _numbers_only(fn: Callable[[Any, Any], Any], symbol: str) -> Callable[[Any, Any], Any]:
    """Arithmetic on numbers only: text is compared, never computed with (``"a" * 10**9`` is memory)."""

    def apply(a: Any, b: Any) -> Any:
        if isinstance(a, str) or isinstance(b, str):
            raise ExpressionError(f"{symbol} of text {a!r}, {b!r}")
        return fn(a, b)

    return apply


def _power(base: Any, exponent: Any) -> Any:
    if isinstance(exponent, bool | int):
        if abs(exponent) > MAX_EXPONENT:
            raise ExpressionError(f"power with exponent {exponent} (at most {MAX_EXPONENT})")
        if (
            isinstance(base, bool | int)
            and exponent > 0
            and abs(base).bit_length() * exponent > MAX_POWER_BITS
        ):
            raise ExpressionError(f"power {base}**{exponent} too large (over {MAX_POWER_BITS} bits)")
    elif abs(exponent) > MAX_EXPONENT:
        raise ExpressionError(f"power with exponent {exponent} (at most {MAX_EXPONENT})")
    try:
        result = base**exponent
    except (OverflowError, ZeroDivisionError) as exc:
        raise ExpressionError(f"power {base}**{exponent}: {exc}") from None
    if isinstance(result, complex):
        raise ExpressionError(f"power {base}**{exponent} is not a real number")
    return result


def _describe(node: ast.AST) -> str:
    """What a refused node is, in words a spec author knows."""
    if isinstance(node, ast.Attribute):
        return f"attribute access '.{node.attr}'"
    if isinstance(node, ast.Call):
        return _call_refused(node)
    if isinstance(node, ast.Lambda):
        return "lambda"
    if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        return "comprehension"
    if isinstance(node, ast.Subscript):
        return "subscript"
    if isinstance(node, ast.Constant):
        return f"constant {node.value!r}"
    if isinstance(node, ast.List | ast.Tuple):
        return "a list or tuple other than right of 'in'"
    if isinstance(node, ast.BinOp | ast.UnaryOp | ast.Compare | ast.BoolOp):
        op = getattr(node, "op", None) or getattr(node, "ops", [None])[0]
        return f"operator {type(op).__name__}"
    return type(node).__name__


def _call_refused(node: ast.Call) -> str:
    """What is wrong with a call the language refuses: the function, a keyword, a ``*`` or too few
    arguments."""
    func = node.func
    if not isinstance(func, ast.Name) or func.id not in _FUNCTIONS:
        name = func.id if isinstance(func, ast.Name) else ast.unparse(func)
        what = f"call of {name!r}"
    elif node.keywords:
        arg = node.keywords[0].arg
        what = f"keyword argument {arg!r} of {func.id}()" if arg else f"'**' argument of {func.id}()"
    elif any(isinstance(a, ast.Starred) for a in node.args):
        what = f"'*' argument of {func.id}()"
    else:
        what = f"{func.id}() of {len(node.args)} argument{'s' if len(node.args) != 1 else ''}"
    return what


def _allowed(node: ast.AST) -> str:
    """What the language allows in place of a refused ``node``, where a spec author needs telling."""
    if isinstance(node, ast.Call):
        return CALLS_ALLOWED
    if isinstance(node, ast.Constant):
        return f"constants are numbers, True, False and text of at most {MAX_TEXT} characters"
    return ""


@dataclass(frozen=True)
class Expression:
    """A checked expression: its text, the names it reads and a compiled evaluator."""

    text: str
    names: frozenset[str]
    where: str
    _evaluate: Evaluator
    _arrays: arrays.ArrayEvaluator | None = None  # the same on numpy columns (None: not computable there)

    def __call__(self, values: Mapping[str, Number]) -> Any:
        """The value for ``values`` (every name of ``names`` must be there); ``ExpressionError`` naming
        ``where`` if it cannot be computed."""
        try:
            return self._evaluate(values)
        except ExpressionError as exc:
            raise ExpressionError(f"{self.where}: {self.text!r}: {exc}") from None
        except ZeroDivisionError:
            raise ExpressionError(f"{self.where}: {self.text!r}: division by zero") from None
        except (OverflowError, ValueError, TypeError) as exc:
            raise ExpressionError(f"{self.where}: {self.text!r}: {exc}") from None

    def truth_of_rows(self, columns: Mapping[str, Any], rows: int) -> Any:
        """Per row of ``columns`` (one numpy array of ``rows`` values per name), whether the expression is
        true: what ``bool(self(values))`` says row by row, an ``ExpressionError`` counting as False. None
        where the arrays cannot give exactly that answer (text, integers beyond 2**53:
        ``kernels.kernel.arrays``); then ask one row at a time."""
        if self._arrays is None:
            return None
        try:
            return arrays.truth(self._arrays, columns, rows)
        except arrays.Inexact:
            return None

    def integer(self, values: Mapping[str, Number]) -> int:
        """The value as an int: a whole float (``4096 / 2``) counts, ``1.5`` does not."""
        value = self(values)
        if isinstance(value, float):
            if not math.isfinite(value) or value != int(value):
                raise ExpressionError(f"{self.where}: {self.text!r} = {value} is not a whole number")
            return int(value)
        return int(value)


def parse(text: Any, names: Collection[str], where: str) -> Expression:
    """Parse ``text`` (a string or a number) as an expression over ``names``; ``where`` (spec file and
    field) leads every error message."""
    if isinstance(text, bool):
        text = "True" if text else "False"
    if isinstance(text, int | float):
        text = repr(text)
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError(f"{where}: expected an expression (a string or a number), got {text!r}")
    if len(text) > MAX_CHARS:
        raise ExpressionError(f"{where}: expression of {len(text):,} characters (at most {MAX_CHARS:,})")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, RecursionError, MemoryError, ValueError) as exc:
        why = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
        raise ExpressionError(f"{where}: {text!r} is not an expression ({why})") from None
    _check_size(tree, text, where)
    known = frozenset(names)
    used: set[str] = set()
    evaluate = _build(tree.body, known, used, text, where)
    try:
        on_arrays: arrays.ArrayEvaluator | None = arrays.build(tree.body)
    except arrays.NotVectorised:
        on_arrays = None
    return Expression(text, frozenset(used), where, evaluate, on_arrays)


def _check_size(tree: ast.AST, text: str, where: str) -> None:
    """Nodes and depth counted without recursion, before the recursive build."""
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise ExpressionError(f"{where}: {text[:60]!r}... has over {MAX_NODES} nodes")
        if depth > MAX_DEPTH:
            raise ExpressionError(f"{where}: {text[:60]!r}... nests deeper than {MAX_DEPTH}")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _build(node: ast.AST, known: frozenset[str], used: set[str], text: str, where: str) -> Evaluator:
    def sub(child: ast.AST) -> Evaluator:
        return _build(child, known, used, text, where)

    def refuse(what: str, allowed: str = "") -> ExpressionError:
        return ExpressionError(
            f"{where}: {text!r}: {what} is not allowed" + (f"; {allowed}" if allowed else "")
        )

    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= MAX_TEXT):
            return lambda _: value
        raise refuse(_describe(node), _allowed(node))
    if isinstance(node, ast.Name):
        name = node.id
        if name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise ExpressionError(f"{where}: {text!r}: unknown name {name!r} (known: {listed})")
        used.add(name)
        return lambda values: values[name]
    if isinstance(node, ast.BinOp):
        left, right = sub(node.left), sub(node.right)
        if isinstance(node.op, ast.Pow):
            power = _numbers_only(_power, "**")
            return lambda v: power(left(v), right(v))
        if type(node.op) not in _BINARY:
            raise refuse(f"operator {type(node.op).__name__}")
        binary = _numbers_only(_BINARY[type(node.op)], type(node.op).__name__)
        return lambda v: binary(left(v), right(v))
    if isinstance(node, ast.UnaryOp):
        operand = sub(node.operand)
        if isinstance(node.op, ast.USub):
            return lambda v: -operand(v)
        if isinstance(node.op, ast.UAdd):
            return lambda v: +operand(v)
        if isinstance(node.op, ast.Not):
            return lambda v: not operand(v)
        raise refuse(f"operator {type(node.op).__name__}")
    if isinstance(node, ast.BoolOp):
        return _boolean(node, [sub(p) for p in node.values])
    if isinstance(node, ast.Compare):
        return _comparison(node, sub, refuse)
    if isinstance(node, ast.IfExp):
        test, body, orelse = sub(node.test), sub(node.body), sub(node.orelse)
        return lambda v: body(v) if test(v) else orelse(v)
    if isinstance(node, ast.Call):
        func = node.func
        if (
            not isinstance(func, ast.Name)
            or func.id not in _FUNCTIONS
            or node.keywords
            or len(node.args) < 2
            or any(isinstance(a, ast.Starred) for a in node.args)
        ):
            raise refuse(_call_refused(node), CALLS_ALLOWED)
        fn = _FUNCTIONS[func.id]
        args = [sub(a) for a in node.args]
        return lambda v: fn(*(a(v) for a in args))
    raise refuse(_describe(node), _allowed(node))


def _boolean(node: ast.BoolOp, parts: list[Evaluator]) -> Evaluator:
    """``and``/``or`` as Python evaluates them: the first operand that decides, else the last."""
    if isinstance(node.op, ast.And):

        def all_of(v: Mapping[str, Number]) -> Any:
            result: Any = True
            for p in parts:
                result = p(v)
                if not result:
                    return result
            return result

        return all_of

    def any_of(v: Mapping[str, Number]) -> Any:
        result: Any = False
        for p in parts:
            result = p(v)
            if result:
                return result
        return result

    return any_of


def _comparison(
    node: ast.Compare, sub: Callable[[ast.AST], Evaluator], refuse: Callable[..., ExpressionError]
) -> Evaluator:
    """A comparison, chained as Python chains it; ``in``/``not in`` only over a list or tuple written out."""
    first = sub(node.left)
    ops: list[tuple[Any, Evaluator]] = []
    for op_node, right_node in zip(node.ops, node.comparators, strict=True):
        if isinstance(op_node, ast.In | ast.NotIn):
            # Kernel Tuner's restrictions say ``block_size_x in [128, 256]``: membership of a list or
            # tuple written out (its items are expressions), nothing else
            if not isinstance(right_node, ast.List | ast.Tuple) or len(right_node.elts) > MAX_ITEMS:
                raise refuse(f"'in' over anything but a list or tuple of at most {MAX_ITEMS} items")
            items = [sub(e) for e in right_node.elts]
            negate = isinstance(op_node, ast.NotIn)

            def members(v: Mapping[str, Number], items: list[Evaluator] = items) -> list[Any]:
                return [i(v) for i in items]

            ops.append((("in", negate), members))
            continue
        op = _COMPARE.get(type(op_node))
        if op is None:
            raise refuse(f"comparison {type(op_node).__name__}")
        ops.append((op, sub(right_node)))

    def chained(v: Mapping[str, Number]) -> bool:
        left = first(v)
        for op, right in ops:
            value = right(v)
            if isinstance(op, tuple):  # ("in", negate): value is the list's items
                if (left in value) == op[1]:
                    return False
                continue  # Python chains ``a in [..] < b`` on the list; nothing sensible follows it
            if not op(left, value):
                return False
            left = value
        return True

    return chained
