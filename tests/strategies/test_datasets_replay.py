"""Reading recorded data (Kernel Tuner caches, our sweep Parquet) and replaying it with real noise."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.datasets import Dataset, align_params, load_datasets, write_parquet
from launchtune.pipeline.strategies.replay import ReplayError, ReplayWorkload
from tests.strategies.conftest import DEFAULT, KERNEL_BEST, cache_time, kernel_ms


def test_cache_loads_params_failures_and_device_facts(cache_file):
    (d,) = load_datasets(cache_file)
    assert d.params == ["block_size_x", "block_size_y", "tile"]  # use_cmem takes one value: a constant
    assert len(d.frame) == 60 and (d.frame["status"] == "failed").sum() == 1
    assert d.device["features"]["bandwidth_gbs"] == 1555
    best = d.ok.loc[d.ok["time"].idxmin()]
    assert (best["block_size_x"], best["block_size_y"], best["tile"]) == (64, 4, 2)
    assert d.optimum == pytest.approx(cache_time(64, 4, 2), rel=0.02)


def test_cache_export_round_trip(cache_file, tmp_path):
    (d,) = load_datasets(cache_file)
    out = write_parquet(d, tmp_path / "a100.parquet")
    (back,) = load_datasets(out)
    assert back.params == d.params
    merged = d.frame.merge(back.frame, on=d.params, suffixes=("", "_back"))
    assert len(merged) == 60
    assert np.allclose(merged["time"].fillna(-1), merged["time_back"].fillna(-1))
    assert all(np.allclose(a, b) for a, b in zip(merged["times"], merged["times_back"], strict=True))


def _unclosed_copy(cache_file, path, cut: int = 0):
    """``cache_file`` as a Kernel Tuner run leaves it when interrupted: the header it writes first (its JSON
    without the two closing braces), then one ``"key": {...},`` line per entry, never closed; ``cut`` drops
    that many characters from the end (a write cut short)."""
    raw = json.loads(gzip.open(cache_file, "rt").read())
    entries = raw.pop("cache")
    text = json.dumps({**raw, "cache": {}}, indent="")[:-3]
    for key, entry in entries.items():
        text += "\n" + json.dumps({key: entry})[1:-1] + ","
    path.write_text(text[: len(text) - cut])
    return path


def test_a_cache_an_interrupted_kernel_tuner_run_left_open_reads_as_the_closed_one(cache_file, tmp_path):
    (closed,) = load_datasets(cache_file)
    (unclosed,) = load_datasets(_unclosed_copy(cache_file, tmp_path / "A100.json"))
    assert unclosed.params == closed.params
    pd.testing.assert_frame_equal(unclosed.frame.drop(columns="times"), closed.frame.drop(columns="times"))
    assert (unclosed.frame["status"] == "failed").sum() == 1


def test_an_unclosed_cache_reads_as_kernel_tuners_own_reader_reads_it(cache_file, tmp_path):
    util = pytest.importorskip("kernel_tuner.util", reason="kernel_tuner not installed (extra 'kt')")
    path = _unclosed_copy(cache_file, tmp_path / "A100.json")
    theirs = util.read_cache(str(path), open_cache=False)["cache"]
    (ours,) = load_datasets(path)
    assert len(ours.frame) == len(theirs) == 60
    for row in ours.frame.itertuples():
        entry = theirs[f"{row.block_size_x},{row.block_size_y},{row.tile},1"]
        if row.status == "ok":
            assert row.time == entry["time"]
        else:
            assert entry["time"] == "RuntimeFailedConfig" and np.isnan(row.time)


def test_a_cache_cut_off_inside_an_entry_is_refused_in_one_line(cache_file, tmp_path):
    path = _unclosed_copy(cache_file, tmp_path / "A100.json", cut=20)
    with pytest.raises(UserError, match="A100.json: not a readable Kernel Tuner cache") as err:
        load_datasets(path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("content", [b"not json", b'{"cache": {}}'])
def test_bad_cache_is_a_user_error_naming_the_file(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(UserError, match="bad.json"):
        load_datasets(path)


def test_missing_path_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        load_datasets(tmp_path / "nope.json.gz")


def test_replay_draws_from_recorded_repeats(cache_file):
    (d,) = load_datasets(cache_file)
    config = {"block_size_x": 32, "block_size_y": 2, "tile": 1}
    row = d.frame[(d.frame["block_size_x"] == 32) & (d.frame["block_size_y"] == 2) & (d.frame["tile"] == 1)]
    times = row["times"].iloc[0]
    w = ReplayWorkload(d, seed=3)
    draws = [w.run(config, repeats=1).total for _ in range(200)]
    assert set(np.round(draws, 12)) <= set(np.round(times, 12))
    assert len(set(draws)) > 3  # noise is real: not one fixed answer
    again = ReplayWorkload(d, seed=3)
    assert [again.run(config, repeats=1).total for _ in range(200)] == draws


def test_replay_failed_and_unrecorded(cache_file):
    (d,) = load_datasets(cache_file)
    w = ReplayWorkload(d)
    failed = {"block_size_x": 256, "block_size_y": 8, "tile": 3}
    assert w.run(failed, 3).extra["status"] == "failed" and not w.check(failed).ok
    assert w.recorded_time(failed)[0] == float("inf")
    unknown = {"block_size_x": 16, "block_size_y": 1, "tile": 7}
    assert not w.answerable(unknown)
    with pytest.raises(ReplayError):
        w.run(unknown, 1)


def test_sweep_parquet_is_separable_with_inferred_default(sweep_file):
    (d,) = load_datasets(sweep_file)
    assert d.name == "h100"
    assert d.kernels == {
        "flux": ["flux.blocks", "flux.threads"],
        "update": ["update.blocks", "update.threads"],
    }
    assert d.kernel_times == {"flux": "ms.flux", "update": "ms.update"}
    assert d.default == DEFAULT
    assert (d.frame["status"] == "failed").sum() >= 1


def test_replay_estimates_unrecorded_configuration_additively(sweep_file):
    (d,) = load_datasets(sweep_file)
    w = ReplayWorkload(d)
    best = {"flux.blocks": 200, "flux.threads": 128, "update.blocks": 400, "update.threads": 64}
    assert not ((d.frame[list(best)] == pd.Series(best)).all(axis=1)).any(), "fixture must not record it"
    t, source = w.recorded_time(best)
    assert source == "additive"
    expected = sum(kernel_ms(k, *KERNEL_BEST[k]) for k in KERNEL_BEST) + 0.1
    assert t == pytest.approx(expected, rel=0.01)
    config, optimum = w.optimum()
    assert config == best and optimum == pytest.approx(t)


def test_parquet_without_launch_columns_is_a_user_error(tmp_path):
    path = tmp_path / "x.parquet"
    pd.DataFrame({"a": [1, 2], "total_ms": [1.0, 2.0]}).to_parquet(path)
    with pytest.raises(UserError, match="x.parquet.*launch-parameter"):
        load_datasets(path)


def test_default_when_only_one_kernel_was_swept(tmp_path):
    from tests.strategies.conftest import write_sweep

    path = write_sweep(tmp_path / "s.parquet")
    df = pd.read_parquet(path)
    df = df[~((df["sampler"] == "per_kernel_exhaustive") & (df["update.blocks"] != 100))]  # drop one sweep
    df = df[~((df["sampler"] == "per_kernel_exhaustive") & (df["update.threads"] != 32))]
    df.to_parquet(path, index=False)
    (d,) = load_datasets(path)
    assert d.default["update.blocks"] == 100 and d.default["update.threads"] == 32
    first_ok = df[df["status"] == "ok"].iloc[0]
    assert d.default["flux.blocks"] == first_ok["flux.blocks"]  # no value covers half the sweep rows
    ReplayWorkload(d).space()  # a usable space all the same


def test_benchmark_hub_cache_replays_its_own_numbers(hub_dir):
    import gzip
    import json

    path = hub_dir / "convolution" / "W7800.json.gz"
    raw = json.load(gzip.open(path))["cache"]
    times = [v["time"] for v in raw.values() if isinstance(v["time"], float)]
    (d,) = load_datasets(path)
    assert len(d.frame) == len(raw) and d.optimum == min(times)
    w = ReplayWorkload(d, seed=0)
    config, best = w.optimum()
    (entry,) = [v for v in raw.values() if all(v[k] == config[k] for k in config)]
    assert best == entry["time"]
    assert min(entry["times"]) <= w.run(config, 7).total <= max(entry["times"])


def _skewed_cache(path):
    """Two configurations whose median and mean disagree: 'ramp' runs 0.97 ms most of the time but 1.10 ms on
    12 of 32 repeats (mean 1.019, median 0.97); 'steady' runs 1.00 ms (+-0.5%). The best by the mean is
    'steady'; a median-based measurement prefers 'ramp'."""
    import gzip
    import json

    rng = np.random.default_rng(0)
    ramp = [0.97] * 20 + [1.10] * 12
    steady = list(1.0 + 0.005 * rng.standard_normal(32))
    cache = {}
    for x, times in ((1, ramp), (2, steady), (3, [1.3] * 32), (4, [1.5] * 32)):
        cache[f"{x},1"] = {"x": x, "c": 1, "times": times, "time": float(np.mean(times))}
    raw = {"device_name": "toy", "kernel_name": "k", "tune_params_keys": ["x", "c"], "cache": cache}
    with gzip.open(path, "wt") as f:
        json.dump(raw, f)
    return path


def test_measuring_everything_scores_one(tmp_path):
    """Consistency: with enough repeats, exhaustive search's pick is the optimum by the statistic it is scored
    on (the median-of-draws replay scored 1.019 here on every seed)."""
    from launchtune.pipeline.strategies.evaluate import run_one

    (d,) = load_datasets(_skewed_cache(tmp_path / "skew.json.gz"))
    for seed in range(5):
        rec = run_one(d, "per_kernel_exhaustive", 4, seed, repeats=400)
        assert rec["ratio"] == 1.0 and rec["best_measured_ratio"] == 1.0
        assert rec["config"] == {"x": 2}


def test_a_measurement_is_unbiased_and_reproducible(tmp_path):
    (d,) = load_datasets(_skewed_cache(tmp_path / "skew.json.gz"))
    w = ReplayWorkload(d, seed=7)
    draws = [w.run({"x": 1}, 7).total for _ in range(4000)]
    true, _ = w.recorded_time({"x": 1})
    assert true == pytest.approx(np.mean([0.97] * 20 + [1.10] * 12))
    assert np.mean(draws) == pytest.approx(true, rel=2e-3)  # the expectation is the true value
    assert np.median(draws) > 0.99  # not the median of the repeats (0.97)
    # the k-th measurement of a configuration is the same whatever was measured before it
    a, b = ReplayWorkload(d, seed=7), ReplayWorkload(d, seed=7)
    b.run({"x": 2}, 7)
    assert a.run({"x": 1}, 7).total == b.run({"x": 1}, 7).total == draws[0]


def test_a_sweep_folders_plan_gives_the_unused_parameter_rules(tmp_path):
    """The fused CFD sweep's merged data: its plan says the seven kernels' launches are unused where
    fusion > 0; the dataset carries the rules, replay's space and the session's ``unused`` mask apply them,
    and an export keeps them."""
    from launchtune.pipeline.strategies.base import Session
    from launchtune.pipeline.strategies.estimators import launch_features, product_features
    from tests.conftest import REPO

    (d,) = load_datasets(REPO / "data/cfd/h100/sweep_fused/merged")
    assert [r[0] for r in d.inactive] == ["fusion", "fusion", "fusion"]
    assert d.inactive[2] == ["fusion", [1], ["tile.smem", "tile.faces"]]
    space = ReplayWorkload(d, seed=0).space()
    stage = next(c for c in ReplayWorkload(d).candidates() if c["fusion"] == 2)
    key = space.active_key(stage)
    assert key[d.params.index("rhs.threads")] is None and key[d.params.index("tile.block_x")] is not None
    session = Session(ReplayWorkload(d, seed=0), 5, seed=0)
    fusion = session.X[:, d.params.index("fusion")]
    unused = session.unused
    assert unused is not None and unused.shape == session.X.shape
    seven = d.params.index("xi_flux.blocks")
    assert np.array_equal(unused[:, seven], fusion > 0)
    assert np.array_equal(unused[:, d.params.index("tile.faces")], fusion < 2)
    # the unused parameters' values change nothing, so they change no feature either
    shuffled = session.X.copy()
    rng = np.random.default_rng(0)
    for j in range(shuffled.shape[1]):
        shuffled[unused[:, j], j] = rng.choice(np.unique(session.X[:, j]), size=int(unused[:, j].sum()))
    assert not np.array_equal(shuffled, session.X)
    assert np.array_equal(launch_features(shuffled, unused), launch_features(session.X, unused))
    assert not np.array_equal(launch_features(shuffled), launch_features(session.X))  # unless told
    assert product_features(session.X, unused).shape[1] > launch_features(session.X, unused).shape[1]
    assert np.array_equal(product_features(shuffled, unused), product_features(session.X, unused))
    small = d.__class__(d.name, d.params, d.frame.head(40), default=d.default, inactive=d.inactive)
    (back,) = load_datasets(write_parquet(small, tmp_path / "fused.parquet"))
    assert back.inactive == d.inactive


def test_data_without_a_plan_has_no_unused_rules(sweep_file):
    (d,) = load_datasets(sweep_file)
    assert d.inactive == []
    assert ReplayWorkload(d).space().inactive == ()


def test_a_sweep_folders_plan_names_its_parameters(tmp_path):
    """Column names alone cannot tell a parameter from a measurement: the plan's list decides, so a parameter
    no pattern knows (here ``knob.level``) is one, and two rows that differ only in it stay two
    configurations. The committed fused sweep keeps tile.arith, which the patterns once missed."""
    import json

    from tests.conftest import REPO

    (d,) = load_datasets(REPO / "data/cfd/h100/sweep_fused_arith/merged")
    assert "tile.arith" in d.params and len(d.frame) == 6000
    assert set(d.frame["tile.arith"]) == {0, 1}
    merged = tmp_path / "sweep" / "merged"
    merged.mkdir(parents=True)
    rows = pd.DataFrame(
        {
            "k.blocks": [10, 10, 20],
            "k.threads": [32, 32, 64],
            "knob.level": [0, 1, 0],
            "total_ms": [2.0, 1.0, 3.0],
            "status": ["ok"] * 3,
        }
    )
    rows.to_parquet(merged / "part-0.parquet")
    (tmp_path / "sweep" / "plan").mkdir()
    plan = {"params": ["k.blocks", "k.threads", "knob.level"], "inactive": []}
    (tmp_path / "sweep" / "plan" / "gpu.json").write_text(json.dumps(plan))
    (got,) = load_datasets(merged)
    assert got.params == ["k.blocks", "k.threads", "knob.level"] and len(got.frame) == 3
    assert got.optimum == pytest.approx(1.0)
    (bare,) = load_datasets(merged / "part-0.parquet")  # a lone file: the patterns, so knob.level is not seen
    assert bare.params == ["k.blocks", "k.threads"] and len(bare.frame) == 2


def _toy(name: str, columns: dict[str, list[int]]) -> Dataset:
    frame = pd.DataFrame({**columns, "time": [1.0, 2.0], "status": ["ok", "ok"]})
    return Dataset(name=name, params=list(columns), frame=frame, source=f"{name}.json")


def test_align_params_drops_a_constant_parameter_that_another_dataset_left_out():
    # a sweep of the kernel workload records use_cmem (one value); a Kernel Tuner cache leaves it out
    sweep = _toy("h100", {"block_size_x": [16, 32], "use_cmem": [1, 1]})
    cache = _toy("A100", {"block_size_x": [16, 32]})
    aligned = align_params([sweep, cache])
    assert [d.params for d in aligned] == [["block_size_x"], ["block_size_x"]]
    assert "use_cmem" not in aligned[0].frame.columns and list(aligned[1].frame.columns) == list(cache.frame)


def test_align_params_refuses_a_varying_parameter_missing_elsewhere():
    sweep = _toy("h100", {"block_size_x": [16, 32], "tile": [1, 2]})
    cache = _toy("A100", {"block_size_x": [16, 32]})
    with pytest.raises(
        UserError, match=r"h100.json: parameter 'tile' takes 2 values there and is missing from A100"
    ):
        align_params([sweep, cache])
