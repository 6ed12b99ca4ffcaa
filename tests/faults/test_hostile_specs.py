"""Hostile sweep specs, generated (Hypothesis): every key of a spec given any YAML value (numbers huge, NaN,
infinite, negative; strings with NUL, superscripts, fullwidth digits; lists, mappings, booleans, null). The
spec's check answers each with a ``SweepSpec`` or one ``UserError`` line, never another exception: one rule
per kind of value, not a case per attack."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.spec import SPEC_KEYS, parse_spec
from tests.pipeline.conftest import base_spec

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        ["", ".", "..", "auto", "²x64", "２０８x64", "208x64", "1e10", "inf", "nan", "a\x00b", "random"]
    ),
    st.text(max_size=12),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers(), st.booleans()), inner, max_size=4),
    ),
    max_leaves=8,
)
KEYS = list(SPEC_KEYS)  # every key the spec parser knows, so a new key is attacked too
CFD = {"workload": "cfd", "case": "inlet", "size": "208x64", "options": {"space": "paper"}}
OPTION_KEYS = ["smoothing", "perturb", "seed", "scheme", "space"]


def _parses_or_one_line(spec: dict) -> None:
    try:
        parsed = parse_spec(spec, "spec.yaml")
    except UserError as exc:
        text = str(exc)
        assert text.startswith("spec.yaml") and "\n" not in text, text
        return
    assert parsed.seed <= 2**32 - 1 and parsed.samples <= 10**6
    assert all(not isinstance(v, float) or math.isfinite(v) for v in parsed.options.values())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(KEYS), value=VALUES, cfd=st.booleans())
def test_any_value_of_any_key_is_a_spec_or_one_line(key, value, cfd):
    spec = base_spec(**CFD) if cfd else base_spec()
    spec[key] = value
    _parses_or_one_line(spec)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(OPTION_KEYS), value=VALUES, workload=st.sampled_from(["cfd", "tridiag"]))
@example(key="scheme", value={"\n": None}, workload="cfd")  # found on a fresh clone: a message on two lines
@example(key="\n", value=None, workload="cfd")
def test_any_value_of_any_workload_option_is_a_spec_or_one_line(key, value, workload):
    spec = (
        base_spec(**CFD) if workload == "cfd" else base_spec(workload="tridiag", case="random", size="1000")
    )
    spec["options"] = {**spec.get("options", {}), key: value} if workload == "cfd" else {key: value}
    _parses_or_one_line(spec)


NUMERIC_FLAGS = [
    ["sweep", "spec.yaml", "--max-minutes"],
    ["sweep", "spec.yaml", "--workers-per-class"],
    ["sweep", "spec.yaml", "--samples"],
    ["sweep", "spec.yaml", "--seed"],
    ["sweep", "spec.yaml", "--budget"],
    ["strategies", "--dataset", "x", "--budget"],
    ["strategies", "--dataset", "x", "--seeds"],
    ["strategies", "--dataset", "x", "--seed"],
    ["strategies", "--dataset", "x", "--repeats"],
    ["strategies", "--dataset", "x", "--workers"],
    ["strategies", "--dataset", "x", "--budgets"],
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    flag=st.sampled_from(NUMERIC_FLAGS),
    text=st.one_of(
        st.sampled_from(["nan", "inf", "-inf", "0", "-1", "1e300", str(2**64), "1,x", "", "５"]),
        st.integers(-(2**70), 2**70).map(str),
        st.floats().map(str),
        st.text(max_size=8).filter(lambda t: not t.startswith("-")),
    ),
)
def test_a_numeric_flag_is_a_bounded_value_or_one_line(capsys, flag, text):
    from launchtune.pipeline.cli import build_parser

    capsys.readouterr()  # one example's output only
    try:
        args = build_parser().parse_args([*flag, text])
    except SystemExit as exc:
        lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
        assert exc.code == 2 and len(lines) == 1 and lines[0].startswith("error: argument "), lines
        return
    assert text.strip().isascii(), text  # other scripts' digits are refused
    value = vars(args)[flag[-1].lstrip("-").replace("-", "_")]
    if flag[0] == "sweep" and flag[-1] in ("--samples", "--seed", "--budget"):
        return  # any whole number here; its range is checked with the spec's (test_spec_limits)
    for v in value if isinstance(value, list) else [value]:
        assert math.isfinite(v) and v > 0 or (flag[-1] == "--seed" and v == 0), (flag, text, v)
    assert not isinstance(value, float) or value <= 10**7
