"""The Nsight Compute SASS summary (lab/ncu_sass_summary.py) on a committed profile of the stage
kernel."""

from __future__ import annotations

import re
from pathlib import Path

from lab.ncu_sass_summary import main, read_rows, summarize

PROFILE = Path(__file__).parents[2] / "data/cfd/h100/stage_tuning/ncu_d805f5c"


def test_the_sass_page_adds_up_to_the_details_page():
    rows = read_rows(PROFILE / "best_arith1.sass.csv.gz")
    text = summarize(rows, top=5)
    total = int(text.split(" warp instructions")[0].replace(",", ""))
    details = (PROFILE / "best_arith1.txt").read_text()
    executed = int(re.search(r"Executed Instructions\s+inst\s+([\d,]+)", details).group(1).replace(",", ""))
    assert abs(total - executed) / executed < 1e-3  # the same kernel launch, counted two ways
    shares = [float(line.split("|")[2]) for line in text.splitlines() if re.match(r"\| [A-Z0-9_]+ \|", line)]
    assert len(shares) == 5 and shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 100


def test_a_missing_file_is_a_usage_error(tmp_path, monkeypatch, capsys):
    import pytest

    monkeypatch.setattr("sys.argv", ["ncu_sass_summary", str(tmp_path / "none.csv")])
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 2 and "no such file" in capsys.readouterr().err
