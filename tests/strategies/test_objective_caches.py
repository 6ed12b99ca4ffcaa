"""Kernel Tuner caches read with their objective's direction: a GFLOP/s cache picks the highest GFLOP/s
(also where it records ``times``), an energy cache the least energy, a surrogate's pick on a maximised metric
is near its maximum; an objective of no known direction is one line unless ``--objective NAME:max|min``
gives it; and the export writes the objective, its direction and the time beside it."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from launchtune.kernels.objective import Objective
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.datasets import load_datasets
from launchtune.pipeline.strategies.evaluate import run_one
from launchtune.pipeline.strategies.kt_cache import to_cache
from tests.pipeline.conftest import one_line_error, run_cli_here

BX, TILE = [16, 32, 64, 128, 256], [1, 2, 3, 4, 6, 8]


def launch_ms(bx: int, tile: int) -> float:
    """Fastest at tile 1: a launch of more tiles does more work (bx 64 best)."""
    return (1.0 + 0.2 * (np.log2(bx) - 6) ** 2) * (0.4 + 0.6 * tile)


def gflops(bx: int, tile: int) -> float:
    """Work grows with the tile, time less than it: most GFLOP/s at tile 8."""
    return 10.0 * tile / launch_ms(bx, tile)


def energy(bx: int, tile: int) -> float:
    """Least energy at bx 32, tile 1: power falls with the block (not where the time is least)."""
    return launch_ms(bx, tile) * (300 + 40 * np.log2(bx) - 260 * (bx == 32))


def write(path: Path, objective: str, value, times: bool = True, **extra) -> Path:
    cache = {}
    for bx, tile in itertools.product(BX, TILE):
        t = launch_ms(bx, tile)
        entry = {"block_size_x": bx, "tile": tile, "time": t, objective: value(bx, tile)}
        if times:
            entry["times"] = [t * 0.99, t, t * 1.01]
        cache[f"{bx},{tile}"] = entry
    raw = {"device_name": "NVIDIA A100-PCIE-40GB", "kernel_name": "toy", "problem_size": [64],
           "tune_params_keys": ["block_size_x", "tile"], "tune_params": {}, "objective": objective,
           "cache": cache, **extra}  # fmt: skip
    with gzip.open(path, "wt") as f:
        json.dump(raw, f)
    return path


def best(fn, pick=max):
    return pick(itertools.product(BX, TILE), key=lambda c: fn(*c))


@pytest.mark.parametrize("times", [True, False])
def test_a_gflops_cache_picks_the_highest(tmp_path, times):
    (d,) = load_datasets(write(tmp_path / "A100.json.gz", "GFLOP/s", gflops, times=times))
    assert d.objective == Objective("GFLOP/s", maximize=True)
    rec = run_one(d, "random", budget=len(BX) * len(TILE), seed=0)  # measures everything
    bx, tile = best(gflops)
    assert rec["config"] == {"block_size_x": bx, "tile": tile} and rec["ratio"] == 1.0
    assert (bx, tile) != best(launch_ms, min)  # the fastest launch is not the pick
    assert rec["value"] == pytest.approx(gflops(bx, tile)) and rec["objective"] == {"maximize": "GFLOP/s"}


def test_an_energy_cache_picks_the_least_energy(tmp_path):
    (d,) = load_datasets(write(tmp_path / "A100.json.gz", "energy", energy))
    rec = run_one(d, "random", budget=len(BX) * len(TILE), seed=1)
    bx, tile = best(energy, min)
    assert rec["config"] == {"block_size_x": bx, "tile": tile} and (bx, tile) != best(launch_ms, min)


@pytest.mark.parametrize("strategy", ["bayes", "evolve"])
def test_a_surrogates_pick_for_a_maximised_metric_is_near_its_maximum(tmp_path, strategy):
    (d,) = load_datasets(write(tmp_path / "A100.json.gz", "GFLOP/s", gflops))
    top = gflops(*best(gflops))
    fastest = gflops(*best(launch_ms, min))
    assert fastest < 0.7 * top  # the time's direction would pick near the fastest launch
    for seed in range(3):
        rec = run_one(d, strategy, budget=12, seed=seed)
        assert rec["value"] >= 0.9 * top, rec


def test_an_objective_of_no_known_direction_is_one_line_or_takes_the_flag(tmp_path):
    path = write(tmp_path / "A100.json.gz", "score", gflops)
    with pytest.raises(UserError, match=r"objective 'score' has no known direction.*--objective 'score:max'"):
        load_datasets(path)
    line = one_line_error(
        run_cli_here("strategies", "--dataset", str(path), "--strategy", "random", "--budget", "5")
    )
    assert "objective 'score' has no known direction" in line
    (d,) = load_datasets(path, Objective("score", True))
    assert run_one(d, "random", budget=30, seed=0)["config"] == dict(
        zip(["block_size_x", "tile"], best(gflops), strict=True)
    )
    result = run_cli_here("strategies", "--dataset", str(path), "--strategy", "random", "--budget", "30",
                          "--objective", "score:max")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[0])["objective"] == {"maximize": "score"}
    line = one_line_error(run_cli_here("strategies", "--dataset", str(path), "--objective", "score:up"))
    assert "--objective" in line and "NAME:max or NAME:min" in line


def test_a_cache_that_states_its_direction_needs_no_flag(tmp_path):
    path = write(tmp_path / "A100.json.gz", "score", gflops, objective_higher_is_better=True)
    (d,) = load_datasets(path)
    assert d.objective.maximize


def test_the_export_writes_the_objective_and_reads_back_alike(tmp_path):
    (d,) = load_datasets(write(tmp_path / "A100.json.gz", "GFLOP/s", gflops, times=False))
    raw = to_cache(d)
    assert raw["objective"] == "GFLOP/s" and raw["objective_higher_is_better"] is True
    entry = raw["cache"]["64,8"]
    assert entry["GFLOP/s"] == pytest.approx(gflops(64, 8))
    out = tmp_path / "back.json"
    out.write_text(json.dumps(raw))
    (back,) = load_datasets(out)
    np.testing.assert_allclose(back.frame["time"], d.frame["time"])


def test_a_kernel_sweeps_rows_rank_by_their_objective_and_export_with_it(tmp_path):
    """Rows of a kernel spec with an objective (``objective`` column, the objective in the schema): the
    dataset's cost is that column, the time and each metric are kept and exported beside it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {"block_size_x": 32, "steps": s, "status": "ok", "gpu_class": "h100", "total_ms": t,
         "objective": t / s, "metric.ms_per_step": t / s}
        for s, t in ((1, 0.10), (2, 0.16), (4, 0.36))
    ]  # fmt: skip
    table = pa.Table.from_pylist(rows)
    meta = {
        b"launchtune.objective": b'{"minimize": "ms_per_step"}',
        b"launchtune.params": b'["block_size_x", "steps"]',
    }
    path = tmp_path / "rows.parquet"
    pq.write_table(table.replace_schema_metadata(meta), path)
    (d,) = load_datasets(path)
    assert d.objective == Objective("ms_per_step") and set(d.measures) == {"time", "ms_per_step"}
    assert d.ok.sort_values("time").iloc[0]["steps"] == 2  # 0.08 ms per step
    entry = to_cache(d)["cache"]["32,2"]
    assert entry["ms_per_step"] == pytest.approx(0.08) and entry["time"] == pytest.approx(0.16)
    assert to_cache(d)["objective"] == "ms_per_step"
