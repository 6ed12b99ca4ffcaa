"""Python's 4,300-digit limit (issue 54): an integer too long to write, in a spec field, a flag or an argument
of the Python API, is the project's one line (or a ``ValueError`` naming the argument), never Python's
``Exceeds the limit (4300 digits) for integer string conversion`` raised while a message was formatted."""

from __future__ import annotations

import pytest
import yaml

import launchtune
from launchtune.checks import shown
from tests.pipeline.conftest import FAKE, base_spec, one_line_error, run_cli_here

HUGE = 10**5000  # 5,001 digits: past what Python writes (sys.get_int_max_str_digits, 4,300)
HUGE_TEXT = "1" + "0" * 5000


@pytest.mark.parametrize("field", ["samples", "seed", "batch_size"])
def test_a_huge_integer_in_a_spec_field_is_one_line(tmp_path, field):
    text = yaml.safe_dump(base_spec(**{field: 7})).replace(f"{field}: 7", f"{field}: {HUGE_TEXT}")
    (tmp_path / "spec.yaml").write_text(text)
    line = one_line_error(run_cli_here("sweep", "spec.yaml", "--out", str(tmp_path / "out"), cwd=tmp_path))
    assert "at most 4,300 digits" in line and len(line) < 300, line


@pytest.mark.parametrize("flag", ["--samples", "--seed", "--budget", "--workers-per-class", "--max-minutes"])
def test_a_huge_integer_flag_is_one_line(tmp_path, write_spec, flag):
    line = one_line_error(run_cli_here("sweep", str(write_spec()), flag, HUGE_TEXT, cwd=tmp_path))
    assert flag in line and len(line) < 400, line


@pytest.mark.parametrize(
    "argument", ["samples", "seed", "budget", "workers_per_class", "max_minutes", "spec"]
)  # fmt: skip
def test_a_huge_integer_argument_of_sweep_names_the_argument(tmp_path, write_spec, argument):
    """``sweep(samples=10**5000)`` passed its type check and raised Python's ValueError in the limit's own
    message (``spec.py``: ``got {value:,}``); a spec mapping holding one the same."""
    given = {argument: HUGE} if argument != "spec" else {}
    spec = base_spec(samples=HUGE) if argument == "spec" else write_spec()
    with pytest.raises(ValueError, match=f"^{argument}: an integer of about 5,001 digits is past any value"):
        launchtune.sweep(spec, out=tmp_path / "out", allow_workload=[FAKE], **given)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argument, value",
    [
        ("problem_size", HUGE),
        ("problem_size", (64, HUGE)),
        ("arguments", [HUGE]),
        ("tune_params", {"block_size_x": [32, HUGE]}),
        ("atol", HUGE),
        ("iterations", HUGE),
    ],
    ids=["problem_size", "problem_size-tuple", "arguments", "tune_params", "atol", "iterations"],
)
def test_a_huge_integer_argument_of_tune_kernel_names_the_argument(tmp_path, monkeypatch, argument, value):
    """Each raised Python's ValueError somewhere inside (a YAML copy of the arguments, ``repr`` of a
    scalar, the check's own message)."""
    monkeypatch.chdir(tmp_path)
    call = {
        "kernel_name": "k",
        "kernel_source": "__global__ void k(float *x) {}",
        "problem_size": 64,
        "arguments": [],
        "tune_params": {"block_size_x": [32, 64]},
        argument: value,
    }
    with pytest.raises(ValueError, match=f"^{argument}: an integer of about 5,001 digits") as info:
        launchtune.tune_kernel(**call)
    assert "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_shown_never_raises():
    class Hostile:
        def __repr__(self):
            raise RuntimeError("no")

    assert shown(HUGE) == "an integer of about 5,001 digits"
    assert shown([HUGE]) == "a list" and shown(Hostile()) == "a Hostile"
    assert shown("x" * 100) == repr("x" * 100)[:77] + "..."


@pytest.mark.parametrize(
    "restore, match",
    [
        (5, "restore: expected a list of argument indices or names, got a int"),
        ("x", "restore: expected a list of argument indices or names, got a str"),
        ([HUGE], "restore: an integer out of range is not an argument index"),
        ([-1], "restore: -1 is not an argument index or name"),
    ],
    ids=["int", "str", "huge", "negative"],
)
def test_autotune_restore_of_a_wrong_type_is_one_line(restore, match):
    """``restore=5`` was ``TypeError: 'int' object is not iterable`` from inside; a 5,001-digit index raised
    Python's own ValueError in the message."""
    from launchtune.kernels.autotune import AutotuneError, autotune

    with pytest.raises(AutotuneError, match=match) as info:
        autotune(
            source="__global__ void k(float *x) {}", kernel_name="k", tune_params={"block_size_x": [32, 64]},
            problem_size=(64,), cache=False, restore=restore,
        )  # fmt: skip
    assert "\n" not in str(info.value)
