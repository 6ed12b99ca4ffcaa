"""Replacing one strategy's rows of a committed comparison (lab/strategies_replace_rows.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from lab.strategies_replace_rows import main
from launchtune.pipeline.strategies.evaluate import replace_runs


def _runs(strategy: str, ratio: float, seeds=(0, 1)) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"strategy": strategy, "budget": 20, "seed": s, "gpu": g, "ratio": ratio + s, "config": "{}"}
            for g in ("A100", "W6600")
            for s in seeds
        ]
    )


def test_only_the_new_strategys_rows_change_and_the_order_stays():
    committed = pd.concat(
        [_runs("kt:pso", 1.5), _runs("evolve", 1.2), _runs("random", 2.0)], ignore_index=True
    )
    new = _runs("evolve", 1.1).iloc[::-1]  # any order
    out = replace_runs(committed, new)
    assert out[["strategy", "seed", "gpu"]].equals(committed[["strategy", "seed", "gpu"]])
    assert list(out.loc[out.strategy == "evolve", "ratio"]) == [1.1, 2.1, 1.1, 2.1]
    others = out.strategy != "evolve"
    assert out.loc[others].equals(committed.loc[others])


def test_a_partial_or_different_rerun_is_refused():
    committed = pd.concat([_runs("kt:pso", 1.5), _runs("evolve", 1.2)], ignore_index=True)
    with pytest.raises(ValueError, match="same strategies, budgets, seeds and GPUs"):
        replace_runs(committed, _runs("evolve", 1.1, seeds=(0,)))
    with pytest.raises(ValueError, match="same strategies"):
        replace_runs(committed, _runs("evolve", 1.1, seeds=(0, 1, 2)))


def test_the_script_rewrites_the_folder_and_refuses_a_missing_file(tmp_path, capsys):
    folder = tmp_path / "cmp"
    folder.mkdir()
    committed = pd.concat([_runs("kt:pso", 1.5), _runs("evolve", 1.2)], ignore_index=True)
    committed.to_csv(folder / "runs.csv.gz", index=False)
    _runs("evolve", 1.0).to_csv(tmp_path / "new.csv", index=False)
    assert main([str(tmp_path / "new.csv"), str(folder)]) == 0
    table = pd.read_csv(folder / "table.csv")
    assert table.set_index("strategy").loc["evolve", "mean"] == pytest.approx(1.5)
    assert (folder / "table.md").read_text().count("| evolve |") == 2  # the table and the head-to-head
    assert main([str(tmp_path / "absent.csv"), str(folder)]) == 2
    assert "absent.csv: no such file" in capsys.readouterr().err
