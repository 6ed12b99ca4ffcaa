"""Kernel Tuner as a baseline (``kt:<name>``, skipped without kernel_tuner) and the export of our data as a
Kernel Tuner cache (round trip: replaying the export answers every strategy as the data itself)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.datasets import load_datasets
from launchtune.pipeline.strategies import get_strategy
from launchtune.pipeline.strategies.base import Session
from launchtune.pipeline.strategies.evaluate import run_one
from launchtune.pipeline.strategies.replay import ReplayWorkload
from tests.pipeline.conftest import run_cli_here
from tests.strategies.conftest import write_sweep

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def kt():
    return pytest.importorskip("kernel_tuner", reason="kernel_tuner not installed (extra 'kt')")


@pytest.mark.parametrize("name", ["genetic_algorithm", "random_sample"])
def test_kt_strategy_spends_at_most_its_budget_and_reproduces(kt, cache_file, name):
    (d,) = load_datasets(cache_file)
    first = run_one(d, f"kt:{name}", 10, seed=3)
    assert first == run_one(d, f"kt:{name}", 10, seed=3)
    assert 1 <= first["measured"] <= 10 and first["ratio"] >= first["best_measured_ratio"] >= 1.0


def test_kt_sees_the_replays_noise_and_we_pick_its_best(kt, cache_file):
    (d,) = load_datasets(cache_file)
    workload = ReplayWorkload(d, seed=11)
    session = Session(workload, 15, seed=2, device={"dataset": d})
    get_strategy("kt:genetic_algorithm")(session)
    configs = [tuple(m.config.values()) for m in session.history]
    assert len(set(configs)) == len(configs) == session.used <= 15  # distinct configurations, as in KT
    rows = [workload._row[c] for c in configs]
    # every value Kernel Tuner saw is the replay's first measurement of that configuration, not its true value
    assert [m.time for m in session.history] == [workload.measurement(r, 7, 0) for r in rows]
    assert any(m.time != workload.recorded_time(m.config)[0] for m in session.history if np.isfinite(m.time))
    assert session.best().time == min(m.time for m in session.history)


def test_unknown_kt_strategy_is_a_user_error(kt, cache_file):
    from launchtune.pipeline.strategies.base import StrategyError

    (d,) = load_datasets(cache_file)
    with pytest.raises(StrategyError, match="unknown Kernel Tuner strategy 'nope'"):
        run_one(d, "kt:nope", 5, seed=0)


def test_export_round_trip_replays_identically(tmp_path):
    sweep = write_sweep(tmp_path / "sweep.parquet", n_random=40)
    out = tmp_path / "out"
    r = run_cli_here("export", "--format", "kernel-tuner", str(sweep), str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["exported"].endswith("h100.json.gz")
    (merged,) = load_datasets(sweep)
    (back,) = load_datasets(out / "h100.json.gz")
    assert back.params == merged.params and len(back.frame) == len(merged.frame)
    same = ("config", "time", "measured", "best_measured_config", "time_source", "gpu")
    for strategy in ("random", "iterative", "bayes", "evolve"):
        for seed in (0, 1):
            a, b = run_one(back, strategy, 12, seed), run_one(merged, strategy, 12, seed)
            assert {k: a[k] for k in same} == {k: b[k] for k in same}
            # a cache cannot say which parameters launch which kernel, so the export's optimum is the best
            # recorded configuration; the sweep's is the better of that and the composed per-kernel optimum
            assert a["optimum"] == ReplayWorkload(merged, estimate_unrecorded=False).optimum()[1]


def test_export_takes_a_sweep_folder_whose_own_json_files_are_not_caches(tmp_path):
    sweep = tmp_path / "sweep"
    (sweep / "merged").mkdir(parents=True)
    write_sweep(sweep / "merged" / "part-0.parquet", n_random=10)
    for name in ("sweep.json", "report.json", "validation.json"):
        (sweep / name).write_text("{}")
    r = run_cli_here("export", "--format", "kernel-tuner", str(sweep), str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    (back,) = load_datasets(tmp_path / "out" / "h100.json.gz")
    (merged,) = load_datasets(sweep / "merged")
    assert back.params == merged.params and len(back.frame) == len(merged.frame)
    # a sweep folder reads as its merged rows everywhere a dataset is read
    (direct,) = load_datasets(sweep)
    assert direct.frame.equals(merged.frame)


def test_a_sweep_folder_without_merged_data_is_one_line(tmp_path):
    (tmp_path / "sweep.json").write_text("{}")
    with pytest.raises(UserError, match="without merged data; run `launchtune merge"):
        load_datasets(tmp_path)


def test_a_cache_write_cut_short_leaves_the_old_file_whole_and_no_temporary(tmp_path, monkeypatch):
    from launchtune.pipeline.strategies.kt_cache import write_cache

    (d,) = load_datasets(write_sweep(tmp_path / "sweep.parquet", n_random=10))
    out = tmp_path / "out" / "h100.json.gz"
    before = write_cache(d, out).read_bytes()
    assert write_cache(d, out).read_bytes() == before  # the same bytes: no time stamp in the gzip header

    def half_then_fail(self, data):
        Path.write_text(self, "half")
        raise OSError("disk full")

    monkeypatch.setattr(Path, "write_bytes", half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        write_cache(d, out)
    monkeypatch.undo()
    assert out.read_bytes() == before and sorted(p.name for p in out.parent.iterdir()) == ["h100.json.gz"]


def test_export_refuses_several_classes_into_one_file(tmp_path, cache_dir):
    r = run_cli_here("export", "--format", "kernel-tuner", str(cache_dir), str(tmp_path / "x.json"))
    assert r.returncode == 2 and "holds 3 GPU classes" in r.stderr


def test_a_large_product_builds_kernel_tuners_space_from_the_recorded_configurations(
    kt, cache_file, monkeypatch
):
    from kernel_tuner import interface

    from launchtune.pipeline.strategies import kernel_tuner_baseline as ktb

    (d,) = load_datasets(cache_file)
    session = Session(ReplayWorkload(d, seed=1), 10, seed=0, device={"dataset": d})
    cache = ktb._cache(session)
    params = cache["tune_params_keys"]
    recorded = {tuple(e[p] for p in params) for e in cache["cache"].values()}
    monkeypatch.setattr(ktb, "MAX_ENUMERATED", 0)  # as for the fused CFD sweeps' 22 parameters
    with ktb._recorded_searchspace(cache, params):
        space = interface.Searchspace(cache["tune_params"], [], 1024)
    assert set(space.list) == recorded and space.size == len(recorded)
    from kernel_tuner.searchspace import Searchspace

    assert interface.Searchspace is Searchspace  # restored after the block
    first = run_one(d, "kt:genetic_algorithm", 10, seed=3)
    assert first == run_one(d, "kt:genetic_algorithm", 10, seed=3)
    assert 1 <= first["measured"] <= 10
