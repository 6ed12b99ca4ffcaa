"""``python3 -m tools.record_run``: pytest's summary line read into the counts the README prints."""

from __future__ import annotations

import json
import sys

import pytest

from tools import readme
from tools.record_run import main, parse_summary


def test_the_last_summary_line_gives_counts_and_seconds():
    last = "= 1 failed, 912 passed, 49 skipped, 3 deselected, 2 warnings, 1 error in 2682.01s (0:44:42) ="
    out = "lint ok\n....s.F\n" + last + "\n"
    counts, seconds = parse_summary("== 3 passed in 1.00s ==\n" + out)
    assert counts == {"failed": 1, "passed": 912, "skipped": 49, "errors": 1} and seconds == 2682.01
    assert parse_summary("872 passed, 44 skipped in 678.12s (0:11:18)") == (
        {"passed": 872, "skipped": 44},
        678.12,
    )
    with pytest.raises(ValueError, match="no pytest summary"):
        parse_summary("make: *** [lint] Error 1\n")


def test_a_recorded_run_becomes_the_readme_sentence(tmp_path):
    out = tmp_path / "data" / "ci" / "last_run.json"
    script = "print('== 5 passed, 1 skipped in 3.50s ==')"
    assert main(["--out", str(out), "--", sys.executable, "-c", script]) == 0
    record = json.loads(out.read_text())
    assert record["counts"] == {"passed": 5, "skipped": 1} and record["pytest_s"] == 3.5 and record["rc"] == 0
    sentence = readme.BLOCKS["make_test"](tmp_path)
    assert "6 tests, 5 passed, 1 skipped" in sentence and record["commit"][:7] in sentence
    assert "FAILED" not in sentence
    # a failing run is recorded and says so
    failing = "import sys; print('1 failed, 4 passed in 2.00s'); sys.exit(1)"
    assert main(["--out", str(out), "--", sys.executable, "-c", failing]) == 1
    assert "FAILED (exit code 1)" in readme.BLOCKS["make_test"](tmp_path)
