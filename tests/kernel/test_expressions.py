"""The expression language of kernel specs: every allowed form computes what Python would, every other form
is refused at parse time with the field named, and nothing can run long or deep."""

from __future__ import annotations

import pytest

from launchtune.kernels.kernel.expressions import MAX_CHARS, ExpressionError, parse

NAMES = ["a", "b", "c", "block_size_x"]
VALUES = {"a": 7, "b": 2, "c": 0, "block_size_x": 48}


@pytest.mark.parametrize(
    "text",
    [
        "a + b",
        "a - b",
        "a * b",
        "a / b",
        "a // b",
        "a % b",
        "a ** b",
        "-a + +b",
        "a < b",
        "a <= b",
        "a > b",
        "a >= b",
        "a == 7",
        "a != 7",
        "1 < b < a",
        "1 < a < b",
        "0 <= c < b <= a",
        "a > 1 and b > 1",
        "a > 1 and c",
        "c or b",
        "not c",
        "not (a > 1 or b > 5)",
        "min(a, b)",
        "max(a, b, 10)",
        "a if c else b",
        "block_size_x % 32 != 0",
        "(a + 1) * (b + 2) * 4 <= 48 * 1024",
        "2.5 * a",
        "True and a",
        "a / 2 == 3.5",
        "-a // b",
        "-a % b",
    ],
)
def test_allowed_forms_agree_with_python(text):
    expected = eval(text, {"__builtins__": {"min": min, "max": max}}, dict(VALUES))  # the oracle
    assert parse(text, NAMES, "k.yaml: restrictions[0]")(VALUES) == expected


def test_numbers_and_names_are_recorded():
    expr = parse("a * b + 3", NAMES, "w")
    assert expr.names == frozenset({"a", "b"})
    assert parse(16, NAMES, "w")({}) == 16
    assert parse("4096 / 2", NAMES, "w").integer({}) == 2048
    with pytest.raises(ExpressionError, match="not a whole number"):
        parse("7 / 2", NAMES, "w").integer({})


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (
            "__import__('os').system('x')",
            "call of \"__import__('os').system\" is not allowed; the only calls are min(a, b, ...) and max",
        ),
        ("a.real", "attribute access"),
        ("(1).__class__", "attribute access"),
        ("lambda: 1", "lambda"),
        ("[x for x in range(3)]", "comprehension"),
        ("{x: 1 for x in (1,)}", "comprehension"),
        ("sum(x for x in (1,))", "call of 'sum'"),
        ("open('f')", "call of 'open'"),
        ("abs(a)", "call of 'abs'"),
        ("min(a)", "min() of 1 argument is not allowed"),
        ("max(*a)", "'*' argument of max() is not allowed"),
        ("min(a, key=b)", "keyword argument 'key' of min() is not allowed"),
        ("a[0]", "subscript"),
        ("'" + "t" * 201 + "'", "constant 'ttt"),
        ("None", "constant None"),
        ("1j", "constant 1j"),
        ("d", "unknown name 'd'"),
        ("__builtins__", "unknown name"),
        ("a @ b", "operator MatMult"),
        ("a << b", "operator LShift"),
        ("a & b", "operator BitAnd"),
        ("~a", "operator Invert"),
        ("a in b", "'in' over anything but a list or tuple"),
        ("a not in range(3)", "'in' over anything but a list or tuple"),
        ("a is b", "comparison Is"),
        ("(a, b)", "a list or tuple other than right of 'in'"),
        ("[a]", "a list or tuple other than right of 'in'"),
        ("f'{a}'", "JoinedStr"),
        ("(x := 1)", "NamedExpr"),
        ("a = 1", "not an expression"),
        ("import os", "not an expression"),
        ("", "expected an expression"),
        (None, "expected an expression"),
    ],
)
def test_refused_forms_name_the_field(text, why):
    with pytest.raises(ExpressionError) as info:
        parse(text, NAMES, "kernel.yaml: restrictions[3]")
    message = str(info.value)
    assert message.startswith("kernel.yaml: restrictions[3]: ")
    assert why in message
    assert "\n" not in message


def test_size_limits_refuse_before_building():
    with pytest.raises(ExpressionError, match="characters"):
        parse("a + " * (MAX_CHARS // 4) + "a", NAMES, "w")
    with pytest.raises(ExpressionError, match="nodes"):
        parse("min(" + ", ".join(["a"] * 320) + ")", NAMES, "w")
    with pytest.raises(ExpressionError, match="not an expression"):
        parse("(" * 300 + "a" + ")" * 300, NAMES, "w")  # Python's own parser refuses this nesting
    with pytest.raises(ExpressionError, match="nests deeper"):
        parse("-(" * 60 + "a" + ")" * 60, NAMES, "w")
    with pytest.raises(ExpressionError, match="nests deeper"):
        parse("-" * 100 + "a", NAMES, "w")


def test_powers_are_bounded():
    expr = parse("9 ** 9 ** 9", NAMES, "k.yaml: grid_div_x")
    with pytest.raises(ExpressionError, match="k.yaml: grid_div_x: .*exponent|too large"):
        expr({})
    with pytest.raises(ExpressionError, match="too large"):
        parse("3 ** 4000", NAMES, "w")({})
    with pytest.raises(ExpressionError, match="exponent"):
        parse("2.0 ** 1e6", NAMES, "w")({})
    assert parse("2 ** 10", NAMES, "w")({}) == 1024
    assert parse("a ** -1", NAMES, "w")(VALUES) == 7**-1


def test_evaluation_errors_name_the_field():
    expr = parse("a // c", NAMES, "k.yaml: grid_div_y")
    with pytest.raises(ExpressionError, match=r"k.yaml: grid_div_y: 'a // c': division by zero"):
        expr(VALUES)


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("max(a, key=b)", "keyword argument 'key' of max()"),
        ("max(a, **b)", "'**' argument of max()"),
        ("min(*a)", "'*' argument of min()"),
        ("max(a)", "max() of 1 argument"),
        ("min()", "min() of 0 arguments"),
        ("sum(a, b)", "call of 'sum'"),
        ("a.max(b, c)", "call of 'a.max'"),
    ],
)
def test_a_refused_call_says_what_was_refused_and_what_is_allowed(text, refused):
    """Issue 43: "call of 'max' (only min and max) is not allowed" contradicted itself; each refusal names
    its own fault (a keyword, a ``*``, too few arguments, another function), then the calls there are."""
    with pytest.raises(ExpressionError) as info:
        parse(text, NAMES, "spec.yaml: restrictions[0]")
    message = str(info.value)
    assert message == (
        f"spec.yaml: restrictions[0]: {text!r}: {refused} is not allowed; the only calls are "
        "min(a, b, ...) and max(a, b, ...), of two or more plain arguments"
    )
