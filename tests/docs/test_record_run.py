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
    low, high = record["load_1min_during"]  # the load the run met, sampled while it ran
    assert 0 <= low <= high
    sentence = " ".join(readme.BLOCKS["make_test"](tmp_path).split())  # the words, not where they wrap
    assert "6 tests: 5 passed, 1 skipped" in sentence and record["commit"][:7] in sentence
    assert "over 1 recorded runs" in sentence and f"between {low:g} and {high:g}" in sentence
    assert "FAILED" not in sentence
    # a failing run is recorded and says so; the time is the range over every recorded run
    failing = "import sys, time; time.sleep(0.2); print('1 failed, 4 passed in 60.00s'); sys.exit(1)"
    assert main(["--out", str(out), "--", sys.executable, "-c", failing]) == 1
    runs = [json.loads(line) for line in (out.parent / "runs.jsonl").read_text().splitlines()]
    assert [r["pytest_s"] for r in runs] == [3.5, 60.0]
    sentence = " ".join(readme.BLOCKS["make_test"](tmp_path).split())
    assert "FAILED (exit code 1)" in sentence and "took 0.1 to 1.0 minutes" in sentence
    assert "over 2 recorded runs" in sentence


def test_the_readme_gives_the_suite_time_as_a_range_with_the_load():
    """The committed record: issue 42's runs on a loaded machine widen the range the README states."""
    from tests.conftest import REPO

    sentence = " ".join(readme.BLOCKS["make_test"](REPO).split())
    runs = [json.loads(line) for line in (REPO / "data/ci/runs.jsonl").read_text().splitlines()]
    slowest = max(r["pytest_s"] for r in runs) / 60
    assert len(runs) >= 3 and f"to {slowest:.1f} minutes" in sentence
    assert "1-minute load average between" in sentence
