"""End to end: the real CLI, in process (``launchtune.pipeline.cli.main``) or in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.pipeline.conftest import run_cli_here
from tests.strategies.conftest import write_sweep

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    """``launchtune strategies ARGS`` in this process (the tests read its lines, exit code and files); the
    run without ``--out`` below keeps a process of its own, for an environment without $LAUNCHTUNE_RESULTS."""
    return run_cli_here("strategies", *map(str, args), timeout=120)


def test_one_json_line_per_run(cache_file):
    r = cli("--dataset", cache_file, "--strategy", "random", "--budget", 5, "--seeds", 3)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["seed"] for x in lines] == [0, 1, 2]
    for x in lines:
        assert {"strategy", "budget", "seed", "config", "time", "optimum"} <= set(x)
        assert x["budget"] == 5 and x["measured"] == 5 and x["time"] >= x["optimum"]
    again = cli("--dataset", cache_file, "--strategy", "random", "--budget", 5, "--seed", 1)
    assert json.loads(again.stdout) == lines[1]


def test_compare_writes_table_and_figure(cache_dir, tmp_path):
    out = tmp_path / "cmp"
    r = cli(
        "--dataset",
        cache_dir,
        "--compare",
        "--budgets",
        "5,10",
        "--seeds",
        2,
        "--workers",
        1,
        "--strategies",
        "random,iterative,transfer",
        "--out",
        out,
    )
    assert r.returncode == 0, r.stderr
    table = (out / "table.csv").read_text().splitlines()
    assert table[0].startswith(
        "strategy,budget,A100,A4000,W6600,mean,worst GPU,worst seed,best_measured,seeds"
    )
    assert len(table) == 1 + 3 * 2
    # the worst GPU is the highest mean over seeds of one GPU; the worst seed, the highest single run's ratio

    runs, rows = pd.read_csv(out / "runs.csv"), pd.read_csv(out / "table.csv")
    per_run = runs.groupby(["strategy", "budget"])["ratio"].max()
    per_gpu = (
        runs.groupby(["strategy", "budget", "gpu"])["ratio"].mean().groupby(["strategy", "budget"]).max()
    )
    for _, row in rows.iterrows():
        key = (row["strategy"], row["budget"])
        assert row["worst seed"] == pytest.approx(per_run[key], abs=1e-4)
        assert (
            row["worst GPU"] == pytest.approx(per_gpu[key], abs=1e-4)
            and row["worst GPU"] <= row["worst seed"]
        )
    assert (out / "ratio_vs_budget.png").stat().st_size > 1000
    assert "| iterative | 10 |" in (out / "table.md").read_text()
    # progress as whole lines (at least every 10 s, with the time left), the last one at the end
    done = [line for line in r.stderr.splitlines() if line.startswith("36/36 runs  ")]  # 3 x 2 x 2 x 3 GPUs
    assert len(done) == 1 and "\r" not in r.stderr and "left" not in done[0]


def test_compare_without_out_writes_under_the_ignored_results_folder(cache_dir, tmp_path):
    """No --out: the outputs go to results/strategies/ of the working directory (git-ignored), or under
    $LAUNCHTUNE_RESULTS, never into a new unignored folder."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "LAUNCHTUNE_RESULTS"}
    args = ["--dataset", str(cache_dir), "--compare", "--budgets", "5", "--seeds", "1", "--workers", "1"]
    args += ["--strategies", "random"]
    work = tmp_path / "work"
    work.mkdir()
    r = subprocess.run(
        [sys.executable, "-m", "launchtune", "strategies", *args],
        cwd=work,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert [p.name for p in work.iterdir()] == ["results"]
    assert (work / "results" / "strategies" / "table.md").is_file()


def test_several_datasets_join_for_transfer(tmp_path):
    h100 = write_sweep(tmp_path / "h100.parquet")
    h200 = write_sweep(tmp_path / "h200.parquet", seed=1, gpu_class="h200", device_name="NVIDIA H200")
    r = cli("--dataset", h100, "--dataset", h200, "--strategy", "transfer", "--gpu", "h200", "--budget", 3)
    assert r.returncode == 0, r.stderr
    (line,) = [json.loads(x) for x in r.stdout.splitlines()]
    assert line["gpu"] == "h200" and line["measured"] == 3 and line["time_source"] == "recorded"
    r = cli("--dataset", h100, "--dataset", h100, "--budget", 3)
    assert r.returncode == 2 and "GPU 'h100' is also in" in r.stderr


def test_export_imports_a_cache(cache_file, tmp_path):
    r = cli("--dataset", cache_file, "--export", tmp_path / "a.parquet")
    assert r.returncode == 0, r.stderr
    r2 = cli("--dataset", tmp_path / "a.parquet", "--strategy", "per_kernel_exhaustive", "--budget", 60)
    assert json.loads(r2.stdout)["config"] == {"block_size_x": 64, "block_size_y": 4, "tile": 2}


def test_user_mistakes_are_one_line_and_exit_2(tmp_path, cache_file):
    r = cli("--dataset", tmp_path / "missing.json.gz")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "missing.json.gz" in r.stderr
    r = cli("--dataset", cache_file, "--strategy", "per_kernel_exhaustive", "--budget", 10)
    assert r.returncode == 2 and "needs a budget of 60" in r.stderr
    r = cli("--dataset", cache_file, "--gpu", "H100")
    assert r.returncode == 2 and "no GPU 'H100'" in r.stderr
