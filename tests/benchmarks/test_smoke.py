"""Every product benchmark (``benchmarks/``) still runs: a tiny CPU run where the script has a numpy mode, its
``--help`` where it needs a GPU, the shell wrappers parsed; and none reaches into private names of the project
or into ``lab/`` (a renamed private function broke a README command once, unnoticed)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import REPO

BENCH = REPO / "benchmarks"
MODULES = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__")
SOURCED = ("gpu_setup.sh",)  # sourced by the scripts, not run on its own
SCRIPTS = sorted(p.name for p in BENCH.glob("*.sh") if p.name not in SOURCED)
PROJECT = {"launchtune"}


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m ...`` from the repository root; the generous timeout only catches a hang."""
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def helps():
    """Each benchmark's ``--help``, every one in a fresh interpreter of its own as before, started together
    on this machine's cores (the tests wait on their own)."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        yield {name: pool.submit(run, f"benchmarks.{name}", "--help", timeout=120) for name in MODULES}


@pytest.mark.parametrize("name", MODULES)
def test_every_benchmark_answers_help(name, helps):
    r = helps[name].result()
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage:") and f"{name}.py" in r.stdout.splitlines()[0]


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_shell_benchmark_parses_and_names_modules_that_exist(name):
    text = (BENCH / name).read_text()
    assert subprocess.run(["bash", "-n", str(BENCH / name)], capture_output=True).returncode == 0
    called = re.findall(r"-m (benchmarks|lab)\.(\w+)", text)
    driver = 'bash "benchmarks/$s"' in text  # all_gpu_smoke.sh runs the other scripts
    assert called or driver, f"{name} runs no python -m benchmarks.<name>"
    for package, module in called:
        assert (REPO / package / f"{module}.py").is_file(), f"{name}: {package}.{module} does not exist"
    for sourced in re.findall(r"^source (\S+)", text, flags=re.M):
        assert (REPO / sourced).is_file(), f"{name}: sources {sourced}, which does not exist"


@pytest.mark.parametrize("name", SOURCED)
def test_every_sourced_helper_parses_and_is_sourced(name):
    assert subprocess.run(["bash", "-n", str(BENCH / name)], capture_output=True).returncode == 0
    users = [s for s in SCRIPTS if f"source benchmarks/{name}" in (BENCH / s).read_text()]
    assert users, f"{name}: no script sources it"


def _private_uses(path: Path) -> list[str]:
    """``from pipeline/kernels... import _x``, ``obj._x`` on anything but ``self``/``cls``, ``import lab``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top = node.module.split(".")[0]
            if top == "lab":
                found.append(f"line {node.lineno}: from {node.module} import (lab)")
            if top in PROJECT:
                found += [
                    f"line {node.lineno}: from {node.module} import {a.name}"
                    for a in node.names
                    if a.name.startswith("_")
                ]
        elif isinstance(node, ast.Import):
            found += [
                f"line {node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == "lab"
            ]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"line {node.lineno}: .{node.attr}")
    return found


@pytest.mark.parametrize("name", MODULES)
def test_benchmarks_use_only_public_names_and_never_lab(name):
    assert _private_uses(BENCH / f"{name}.py") == []


def test_the_private_name_check_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from launchtune.pipeline.sweep.run import _plan_class, plan_class\nimport lab.cfd_arith\n"
        "def f(work, self):\n    self._ok()\n    return work._gpu(1) + work.__class__\n"
    )
    assert _private_uses(bad) == [
        "line 1: from launchtune.pipeline.sweep.run import _plan_class",
        "line 2: import lab.cfd_arith",
        "line 5: ._gpu",
    ]


def test_scale_rehearsal_runs_the_readme_command_at_a_tiny_size(tmp_path):
    """The README's ``--samples N --workers N --batch-size auto``: 60 replayed samples over 2 CPU workers, one
    of them killed mid-batch, every sample merged exactly once."""
    out = tmp_path / "out"
    r = run(
        "benchmarks.scale_rehearsal",
        *("--samples", "60", "--workers", "2", "--batch-size", "auto", "--time-scale", "0.2", "--no-train"),
        *("--work", str(tmp_path / "work"), "--out", str(out)),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert row["kind"] == "sweep" and row["samples"] == 60 and row["workers"] == 2
    assert row["rows"] == row["distinct_samples"] == 60 and row["every_sample_once"]
    assert isinstance(row["batch_size"], int) and row["batch_size"] >= 1
    assert row["killed_workers"] and row["plan_files"]


def test_autotune_runtime_on_numpy_at_a_tiny_size(tmp_path):
    """Off, scan, seeded and restored runs of the run-time tuner on a 52x16 inlet, numpy backend."""
    out = tmp_path / "out"
    r = run(
        "benchmarks.autotune_runtime",
        *("--backend", "numpy", "--size", "52x16", "--run-seconds", "0.1", "--repeats", "1", "--rounds", "3"),
        *("--out", str(out), "--work", str(tmp_path / "work")),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert not (out / "partial.json").exists(), (out / "partial.json").read_text()[-3000:]
    result = json.loads((out / "results.json").read_text())
    assert set(result["runs"]) == {"off", "scan", "seeded", "restored"}
    assert all(result["bitwise_equal_to_off"].values())


def test_live_search_joins_runs_made_one_per_card(tmp_path):
    """``--join``: runs of ``--shard k/N`` (one process per card) become one summary, each pick against the
    fastest reference row of its own card."""
    from benchmarks.live_search import join

    def part(k: int, best_ms: float, ratio: float) -> Path:
        row = {"config": {"a": 1}, "recorded_ms": 1.0, "remeasured_ms": best_ms}
        search = {
            "strategy": "evolve",
            "budget": 100,
            "seed": k,
            "workers": 1,
            "wall_s": 10.0 + k,
            "against_best_row": {"ratio": ratio, "low": ratio - 0.01, "high": ratio + 0.01, "verdict": "x"},
        }
        summary = {
            "reference": "ref",
            "best_is_pick": False,
            "reference_rows": [row],
            "best_row": 0,
            "reference_sweep_seconds": 100.0,
            "reference_sweep_rows": 6000,
            "device": {"gpu_class": "h100"},
            "searches": [search],
        }
        folder = tmp_path / f"card{k}"
        folder.mkdir()
        (folder / "remeasure.json").write_text(json.dumps(summary))
        return folder

    assert join([part(0, 1.10, 1.02), part(1, 1.12, 1.04)], tmp_path / "out") == 0
    text = (tmp_path / "out" / "summary.md").read_text()
    assert "in each of 2 runs" in text and "1.1000, 1.1200 ms" in text
    (row,) = [line for line in text.splitlines() if line.startswith("| evolve |")]
    assert "| 2 | 1.030 [1.020, 1.040] |" in row and "1.020 [1.010, 1.030]; 1.040 [1.030, 1.050]" in row
    joined = json.loads((tmp_path / "out" / "remeasure.json").read_text())
    assert [s["card"] for s in joined["searches"]] == [0, 1]


def test_live_search_head_to_head_compares_ours_with_each_kernel_tuner_strategy():
    from benchmarks.live_search import head_to_head

    def search(strategy: str, seed: int, ratio: float) -> dict:
        return {
            "strategy": strategy,
            "budget": 20,
            "seed": seed,
            "workers": 1,
            "against_best_row": {"ratio": ratio},
        }

    ours = [search("evolve", s, r) for s, r in enumerate([1.00, 1.01, 1.02])]
    theirs = [search("kt:random_sample", s, r) for s, r in enumerate([1.50, 1.52, 1.49])]
    transfer = [search("transfer", s, 1.0) for s in range(3)]
    lines = head_to_head(ours + theirs + transfer)
    (row,) = [line for line in lines if line.startswith("| 20 |")]
    expected = f"{(1.00 + 1.01 + 1.02) / (1.50 + 1.52 + 1.49):.3f}"  # ratio of the means over seeds
    assert f"| evolve | kt:random_sample | {expected} [" in row and row.endswith(
        "| ours closer to the optimum |"
    )
    assert head_to_head(ours + transfer) == []  # no Kernel Tuner strategy: no table


def test_worst_seed_replays_are_the_same_on_one_process_or_two_and_make_their_tables(tmp_path):
    cache = "data/benchmark_hub/convolution/W7800.json.gz"  # the committed subset: a small space

    def replay(variant: str, out: Path, jobs: str = "1") -> list[float]:
        args = ("--variant", variant, "--dataset", cache, "--budgets", "20", "--seeds", "3", "--jobs", jobs)
        r = run("benchmarks.search_worst_seed", *args, "--out", str(out))
        assert r.returncode == 0, r.stderr
        return sorted(json.loads(line)["ratio"] for line in out.read_text().splitlines())

    one, two = replay("final", tmp_path / "one.jsonl"), replay("final", tmp_path / "two.jsonl", jobs="2")
    assert len(one) == 3 and one == two
    replay("second", tmp_path / "one.jsonl")
    tables = tmp_path / "tables"
    r = run(
        "benchmarks.search_worst_seed",
        "--out",
        str(tmp_path / "one.jsonl"),
        "--tables",
        str(tables),
        "--baseline",
        "second",
    )
    assert r.returncode == 0, r.stderr
    screen = (tables / "screen.md").read_text().splitlines()
    assert screen[2].startswith("| final | 20 | 1 | 3 |")  # the default against ``second`` on the same runs
    r = run("benchmarks.search_worst_seed", "--needles", "--out", "/dev/null", "--dataset", cache)
    assert r.returncode == 0 and r.stdout.splitlines()[2].startswith("| Hub W7800 | "), (r.stdout, r.stderr)


def test_worst_seed_tables_by_budget_and_by_strategy(tmp_path):
    """``by_budget``: a run recorded in two files counts once, each budget its own column; ``by_strategy``:
    each GPU's mean / worst seed and the mean over the Hub's (capitalised) GPUs, our sweep's class apart."""
    import pandas as pd

    from benchmarks.search_worst_seed import by_budget, by_strategy

    def line(budget: int, seed: int, ratio: float, variant: str = "final") -> dict:
        return {"variant": variant, "dataset": "$HUB", "gpu": "W6600", "budget": budget, "seed": seed,
                "ratio": ratio}  # fmt: skip

    runs = pd.DataFrame(
        [line(200, 0, 1.0), line(200, 1, 1.2), line(200, 1, 1.2), line(400, 0, 1.0), line(400, 0, 3.0, "x")]
    )
    table = by_budget(runs).splitlines()
    assert table[2] == "| Hub W6600 | 1.100 / 1.200 (1 of 2) | 1.000 / 1.000 (0 of 1) |"

    csv = tmp_path / "runs.csv"
    pd.DataFrame(
        {
            "strategy": ["evolve"] * 5,
            "budget": [400] * 5,
            "seed": [0, 1, 0, 1, 0],
            "gpu": ["A100", "A100", "W6600", "W6600", "h100"],
            "ratio": [1.0, 1.2, 1.0, 1.0, 1.5],
        }  # fmt: skip
    ).to_csv(csv, index=False)
    header, _, row = by_strategy([csv]).splitlines()
    assert "| our h100 sweep: mean / worst | Hub: mean |" in header
    assert row == "| evolve | 400 | 2 | 1.100 / 1.200 | 1.000 / 1.000 | 1.500 / 1.500 | 1.050 |"


def test_noisy_replay_fits_live_records_and_replays_with_them(tmp_path):
    from benchmarks.noisy_replay import fit, table, worst_of

    def call(drift: float, measured: list[float]) -> dict:
        rows = [{"recorded_ms": 1.0, "remeasured_ms": drift * f} for f in (1.01, 0.99)]
        picks = [
            {"strategy": "evolve", "budget": 20, "seed": s, "pick_search_ms": m, "remeasured_ms": 1.0}
            | {"against_best_row": {"ratio": 1.0 + 0.01 * s}}
            for s, m in enumerate(measured)
        ]
        return {"reference": "data/sweep", "reference_rows": rows, "searches": picks}

    files = []
    for k, c in enumerate([call(1.1, [1.02, 0.98]), call(0.9, [1.0, 1.0]), {"reference": "other"}]):
        files.append(tmp_path / f"{k}.json")
        files[-1].write_text(json.dumps(c))
    found = fit(files, "data/sweep/")
    assert found["calls"] == [str(f) for f in files[:2]] and found["measurements"] == 4
    # +-0.01 about each call's drift, one degree of freedom a call: sqrt(4 * 0.01^2 / 2)
    assert found["model"]["persistent"] == pytest.approx(0.01 * 2**0.5, rel=1e-3)
    model = tmp_path / "noise.json"
    model.write_text(json.dumps(found["model"]))
    out = tmp_path / "runs.jsonl"
    cache = "data/benchmark_hub/convolution/W7800.json.gz"
    args = ("--variant", "final", "--dataset", cache, "--budgets", "20", "--seeds", "1", "--out", str(out))
    assert run("benchmarks.search_worst_seed", *args, "--live-noise", str(model)).returncode == 0
    (rec,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert rec["live_noise"] == str(model) and rec["noise"] == found["model"] and "recorded_ratio" in rec
    lines = table(
        [rec | {"dataset": "data/sweep"}], [{"strategy": "evolve", "budget": 20, "seed": 0, "ratio": 1.0}]
    )
    assert lines.splitlines()[2].startswith("| live evolve | 20 | 1 | 1.000 | 1.000 | 0 | 1.000 | nan |")
    assert lines.splitlines()[3].startswith("| noisy replay final, sweep | 20 | 1 |")
    assert worst_of([1.0, 1.1, 1.2], k=2) == pytest.approx((1.1 + 1.2 + 1.2) / 3)
    # the command as data/combined/search_worst_seed/noisy_replay/README.md writes it: the files last
    (tmp_path / "live.json").write_text(json.dumps(call(1.0, [1.0])))
    told = run(
        "benchmarks.noisy_replay",
        "table",
        "--reference",
        "data/sweep",
        "--runs",
        str(out),
        str(tmp_path / "live.json"),
    )
    assert told.returncode == 0, told.stderr
    assert "| live evolve | 20 | 1 |" in told.stdout
