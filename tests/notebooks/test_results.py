"""``pipeline.results`` on small synthetic folders: discovery, grids, bests, metrics tables, predictions,
streams and launch logs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from launchtune.pipeline import results
from launchtune.pipeline.errors import UserError

from .conftest import BLOCKS, THREADS, launch_log, sweep_frame


def test_results_folder_resolves_env_relative_and_missing(tmp_path, monkeypatch):
    monkeypatch.delenv(results.RESULTS_ENV, raising=False)
    assert results.results_folder() == results.DEFAULT_RESULTS.resolve()
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    assert results.results_folder() == tmp_path.resolve()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    assert results.results_folder("mine") == (tmp_path / "mine").resolve()
    assert results.results_folder("data") == results.DEFAULT_RESULTS.resolve()  # from the repository root
    with pytest.raises(UserError, match="no such results folder"):
        results.results_folder("nowhere")


def test_sweep_discovery_finds_every_sweep_folder(results_dir, tmp_path):
    assert [p.name for p in results.sweep_folders(results_dir)] == ["sweep_both", "sweep_cpu", "sweep_h100"]
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "sweep.json").write_text("{}")  # no merged/: not a sweep
    assert results.sweep_folders(tmp_path) == []
    with pytest.raises(UserError, match="no sweep folder"):
        results.load_sweeps(tmp_path)


def test_overview_and_class_rows_take_each_class_once_from_its_own_folder(results_dir):
    sweeps = results.load_sweeps(results_dir)
    over = results.sweep_overview(sweeps)
    assert len(over) == 4  # both classes of the combined folder, one each of the others
    assert set(over.columns) >= {"folder", "gpu_class", "samples", "ok", "invalid", "failed"}
    assert over["invalid"].tolist() == [2, 2, 2, 2]
    rows = results.class_rows(sweeps)
    assert {c: s.name for c, (s, _) in rows.items()} == {"cpu": "sweep_cpu", "h100": "sweep_h100"}
    assert all((r["status"] == "ok").all() and len(r) == 78 for _, r in rows.values())
    both = next(s for s in sweeps if s.name == "sweep_both")
    assert both.combined and results.class_rows([both])["cpu"][0] is both


def test_kernel_grid_is_the_median_per_launch_shape_on_the_plan_grid():
    rows = sweep_frame(("h100",), n=400)
    plan = {
        "params": ["a.blocks", "a.threads", "b.blocks", "b.threads"],
        "values": {"a.blocks": BLOCKS + [400], "a.threads": THREADS},
    }
    grid = results.kernel_grid(rows, plan, "a")
    assert list(grid.columns) == BLOCKS + [400] and list(grid.index) == THREADS
    assert grid[400].isna().all()  # a plan value nobody sampled stays empty
    expected = rows[(rows["a.blocks"] == 200) & (rows["a.threads"] == 64)]["ms.a"].median()
    assert grid.loc[64, 200] == pytest.approx(expected)
    assert results.grid_best(grid) == (300, 128, pytest.approx(grid.loc[128, 300]))
    with pytest.raises(UserError, match="no c.blocks"):
        results.kernel_grid(rows, plan, "c")


def test_kernel_grids_bests_and_best_configurations(results_dir):
    sweeps = results.load_sweeps(results_dir)
    s = next(s for s in sweeps if s.name == "sweep_h100")
    grids = results.kernel_grids(s, "h100")
    assert list(grids) == ["a", "b"]
    bests = results.kernel_bests(grids)
    assert bests[["blocks", "threads"]].values.tolist() == [[300, 128], [300, 128]]
    assert (bests["worst_over_best"] > 1).all()
    best = results.best_configurations(sweeps).set_index("gpu_class")
    assert best.loc["h100", "best sampled ms"] == pytest.approx(s.ok("h100")["total_ms"].min())
    assert np.isnan(best.loc["h100", "speed-up over default"])  # no validation.json: not re-measured
    table = results.best_config_table(s, "h100")
    assert list(table.index) == s.plan["params"] and table["default"].tolist() == [1000, 256, 1000, 256]
    assert "best sampled" in table


def test_reference_times_read_the_report(results_dir):
    s = results.load_sweep(results_dir / "sweep_h100")
    assert set(results.reference_times(s, "h100")) == {"best sampled"}
    s.report = {"classes": {"h100": {"default_measured_ms": 2.0, "predicted_best_measured_ms": 1.5}}}
    assert results.reference_times(s, "h100")["default (re-measured)"] == 2.0


def test_metrics_tables(results_dir):
    both = results.load_sweep(results_dir / "sweep_both")
    r2 = results.r2_table(both.metrics)
    assert set(r2["group"]) == {"cpu", "h100", "combined"}
    assert r2["search_model"].sum() == 3  # one per group
    curves = results.loss_curves(both.metrics)
    assert set(curves) == {"cpu", "h100", "combined"} and all(len(c) > 1 for c in curves.values())
    comparison = results.comparison_table(both.metrics)
    assert set(comparison["gpu_class"]) == {"cpu", "h100"}
    both_sides = comparison[comparison["model"] != "additive"]  # additive is per class only
    assert both_sides[["r2_per_class", "r2_combined"]].notna().all().all()
    loco = results.loco_table(both.metrics)
    assert set(loco["held_out"]) == {"cpu", "h100"} and (loco["picked_over_best"] >= 1).all()
    single = results.load_sweep(results_dir / "sweep_h100")
    assert set(results.comparison_table(single.metrics)["gpu_class"]) == {"h100"}
    assert results.loco_table(single.metrics).empty  # nothing to leave out
    assert results.loco_table(None).empty and results.r2_table(None).empty


def test_surrogate_sweeps_prefer_the_combined_folder(results_dir):
    sweeps = results.load_sweeps(results_dir)
    assert [s.name for s in results.surrogate_sweeps(sweeps)] == ["sweep_both"]
    singles = [s for s in sweeps if not s.combined]
    assert [s.name for s in results.surrogate_sweeps(singles)] == ["sweep_cpu", "sweep_h100"]
    assert results.prediction_groups(sweeps[0]) == ["cpu", "h100", "combined"]
    assert results.prediction_groups(singles[1]) == ["h100"]  # a one-class 'combined' repeats the class


@pytest.mark.parametrize("group", ["h100", "combined"])
def test_refitted_model_is_the_trained_one(results_dir, tmp_path, group):
    """Without model files the group's model is refitted as train fits it: same predictions, recorded R2."""
    import shutil

    copy = tmp_path / "sweep_both"
    shutil.copytree(results_dir / "sweep_both", copy)
    s = results.load_sweep(copy)
    for model in ("mlp", "gbr"):
        saved = results.predictions(s, group, model)
        shutil.rmtree(copy / "models" / group)
        refit = results.predictions(s, group, model)
        assert np.allclose(saved["predicted_ms"], refit["predicted_ms"])
        shutil.copytree(results_dir / "sweep_both" / "models" / group, copy / "models" / group)
        scores = results.prediction_scores(refit)
        recorded = s.metrics["groups"][group]["models"][model]
        assert scores["test"] == pytest.approx(recorded["r2_test"])
        assert scores["train"] == pytest.approx(recorded["r2_train"])
    assert (refit["split"] == "test").sum() == recorded["n_test"]
    assert set(refit["gpu_class"]) == ({"cpu", "h100"} if group == "combined" else {"h100"})


def test_predictions_refuse_unknown_groups_and_models(results_dir):
    s = results.load_sweep(results_dir / "sweep_h100")
    with pytest.raises(UserError, match="no group 'v100'"):
        results.predictions(s, "v100")
    with pytest.raises(UserError, match="only mlp, gbr"):
        results.group_model(s, "h100", "additive-missing")


def test_tridiag_tables_and_speedups(tridiag_dir):
    [folder] = results.tridiag_folders(tridiag_dir.parent.parent)
    td = results.load_tridiag(folder)
    assert td.label == "h100" and set(td.models) == {"raw", "denoised"} and td.can_denoise
    times = results.stream_times(td)
    assert len(times) == 10 * 6 and list(times.columns) == ["size", "streams", "total_ms"]
    table = results.optimum_table(td)
    assert table.set_index("size")["best_streams"].to_dict()[50000] == 2
    short = tridiag_dir.parent / "short"
    short.mkdir()
    td.data[td.data["size"] < 10000].to_csv(short / "streams.csv", index=False)
    few = results.load_tridiag(short)  # 4 sizes: too few to fit, but the times still read
    assert few.models == {} and "at least" in few.skipped["raw"] and len(results.stream_times(few)) == 24
    speed = results.stream_speedups(td).set_index("size")
    assert speed.loc[1000, "best_streams"] == 1 and speed.loc[1000, "over_one_stream"] == pytest.approx(1)
    assert speed.loc[50000, "over_one_stream"] > 1.2
    assert speed["over_gtsv2"].to_numpy() == pytest.approx(0.5 * speed["one_stream_ms"] / speed["best_ms"])
    assert "over_gtsv2_nopivot" in speed
    with pytest.raises(UserError, match="no tridiagonal"):
        results.load_tridiags(tridiag_dir / "nothing")


def test_launch_logs_and_tuning_steps(tmp_path):
    folder = tmp_path / "autotune"
    folder.mkdir()
    launch_log().to_csv(folder / "launches_scan.csv.gz", index=False)
    launch_log().to_csv(folder / "launches.csv", index=False)
    (folder / "launches_notes.txt").write_text("not a log")
    logs = results.launch_logs(tmp_path)
    assert list(logs) == ["autotune/autotune", "autotune/scan"]
    steps = results.tuning_steps(results.load_launches(logs["autotune/scan"])).set_index("kernel")
    assert steps.loc["a", ["tuned_at_step", "blocks", "threads", "candidates"]].tolist() == [2, 300, 128, 3]
    assert steps.loc["b", ["tuned_at_step", "blocks", "threads", "nonoptimal_launches"]].tolist() == [
        1,
        1000,
        256,
        1,
    ]
    (folder / "launches_bad.csv").write_text("seq,kernel\n1,a\n")
    with pytest.raises(UserError, match="missing column 'step'"):
        results.load_launches(folder / "launches_bad.csv")


def test_autotune_results_tables():
    res = {
        "runs": {
            "off": {"steps": 10, "ms_per_step_mean": 1.0, "summary": None},
            "scan": {
                "steps": 10,
                "ms_per_step_mean": 1.2,
                "summary": {
                    "kernels": {
                        "a": {
                            "first_scan_steps": 3,
                            "nonoptimal_launches": 4,
                            "nonoptimal_ms": 1.0,
                            "timed_ms": 50.0,
                        },
                        "b": {
                            "first_scan_steps": 2,
                            "nonoptimal_launches": 1,
                            "nonoptimal_ms": 1.0,
                            "timed_ms": 50.0,
                        },
                    }
                },
            },
        },
        "per_step_ms": {
            "off": {"steps": [0, 1, 2], "ms": [1.0, 1.0, 1.0]},
            "scan": {"steps": [0, 1], "ms": [3, 1]},
        },
        "per_kernel": {
            "a": {
                "exhaustive_best": [300, 128],
                "default_over_best": 1.1,
                "scan": {"param": [300, 128], "over_best": 1.0},
            }
        },
    }
    summary = results.run_summary(res).set_index("run")
    assert summary.loc["scan", "scan_steps"] == 3 and summary.loc["scan", "nonoptimal_share_pct"] == 2.0
    assert pd.isna(summary.loc["off", "scan_steps"])
    steps = results.per_step_times(res)
    assert len(steps) == 5 and set(steps["run"]) == {"off", "scan"}
    every = results.per_step_times({"per_step_ms": {"off": [1.0, 1.1, 0.9]}})  # newer files: every step
    assert every["step"].tolist() == [0, 1, 2] and every["ms"].tolist() == [1.0, 1.1, 0.9]
    picks = results.autotune_picks(res).set_index("kernel")
    assert picks.loc["a", "scan pick"] == (300, 128) and "seeded pick" not in picks
    assert results.per_step_times({}).empty


def test_best_transfer_prices_one_class_best_on_the_other():
    idx = pd.Index([32, 64], name="threads")
    cols = pd.Index([100, 200], name="blocks")
    a = {"k": pd.DataFrame([[1.0, 2.0], [3.0, 4.0]], index=idx, columns=cols)}  # best (100, 32)
    b = {"k": pd.DataFrame([[1.5, 2.0], [3.0, 1.0]], index=idx, columns=cols)}  # best (200, 64)
    table = results.best_transfer({"a": a, "b": b}).set_index(["source", "target"])
    assert table.loc[("a", "b"), "source_best"] == "(100, 32)" and not table.loc[("a", "b"), "same"]
    assert table.loc[("a", "b"), "target_ms_at_source_best_over_best"] == pytest.approx(1.5)
    assert table.loc[("b", "a"), "target_ms_at_source_best_over_best"] == pytest.approx(4.0)


def test_sweeps_are_drawn_one_launch_space_at_a_time():
    sweeps = results.load_sweeps(results.DEFAULT_RESULTS)  # the committed data: CFD paper and fused, tridiag
    paper, fused = results.of_space(sweeps), results.of_space(sweeps, "fused")
    tridiag = results.of_space(sweeps, "default")  # its workload has one launch space, named by no option
    kernel = results.of_space(sweeps, "kernel/convolution")  # a kernel spec's space, named by its case
    assert {results.launch_space(s) for s in paper} == {"paper"} and len(paper) >= 3
    assert {s.spec.name for s in fused} == {"cfd_inlet_fused"}
    assert {s.spec.workload for s in tridiag} == {"tridiag"}
    assert {s.spec.name for s in kernel} == {"kernel_convolution"}
    assert len(paper) + len(fused) + len(tridiag) + len(kernel) == len(sweeps)
    assert set(results.class_rows(fused)) == {"h100", "h200"}
    with pytest.raises(UserError, match="no sweep of launch space 'nonsense'"):
        results.of_space(sweeps, "nonsense")


def test_a_folder_without_merged_rows_is_read_for_its_model_scores_only(results_dir, tmp_path):
    """A combined folder whose rows are not committed (sweep.json and models/metrics.json, no merged/): found
    only on request, its classes from its spec, no rows to predict, never a class's rows in notebook 01."""
    import shutil

    scores = tmp_path / "scores"
    shutil.copytree(results_dir / "sweep_both", scores, ignore=shutil.ignore_patterns("merged"))
    assert results.sweep_folders(tmp_path) == []
    assert results.sweep_folders(tmp_path, without_rows=True) == [scores]
    with pytest.raises(UserError, match="no sweep folder"):
        results.load_sweeps(tmp_path)
    (s,) = results.load_sweeps(tmp_path, without_rows=True)
    assert not s.has_rows and s.classes == ["cpu", "h100"] and s.combined  # groups of metrics.json
    assert results.surrogate_sweeps([s]) == [s] and results.prediction_groups(s) == []
    with pytest.raises(UserError, match="no merged/ here"):
        results.predictions(s, "h100")
    assert results.class_rows([s]) == {}
    with_rows = results.load_sweep(results_dir / "sweep_both")
    assert results.r2_table(s.metrics).equals(results.r2_table(with_rows.metrics))


def test_kernel_spec_grid_spans_the_thread_block():
    """A `kernel` sweep's heat map: its kernel's median time over block_size_x by block_size_y, the median
    over every other parameter; the best cell and the bests table named as those parameters."""
    rng = np.random.default_rng(0)
    rows = pd.DataFrame(
        {
            "block_size_x": rng.choice([16, 32, 64], 300),
            "block_size_y": rng.choice([1, 2, 4], 300),
            "tile": rng.choice([1, 2], 300),
        }
    )
    rows["ms.conv"] = 1 + 16 / rows["block_size_x"] + rows["block_size_y"] / 4 + 0.01 * rows["tile"]
    plan = {"params": ["block_size_x", "block_size_y", "tile"], "values": {"block_size_x": [16, 32, 64, 128]}}
    grid = results.kernel_grid(rows, plan, "conv", results.sweeps.THREAD_BLOCK)
    assert grid.columns.name == "block_size_x" and grid.index.name == "block_size_y"
    cell = rows[(rows["block_size_x"] == 32) & (rows["block_size_y"] == 2)]["ms.conv"].median()
    assert grid.loc[2, 32] == pytest.approx(cell) and list(grid.index) == [1, 2, 4]
    assert results.grid_best(grid)[:2] == (64, 1)
    bests = results.kernel_bests({"conv": grid})
    assert bests[["block_size_x", "block_size_y"]].values.tolist() == [[64, 1]]
    with pytest.raises(UserError, match="no block_size_x/block_size_z"):
        results.kernel_grid(rows, plan, "conv", ("block_size_x", "block_size_z"))


def test_grid_axes_of_each_workload():
    sweeps = results.load_sweeps(results.DEFAULT_RESULTS)
    axes = {results.launch_space(s): results.grid_axes(s) for s in sweeps}
    assert axes["kernel/convolution"] == ("block_size_x", "block_size_y")
    assert axes["paper"] is None and axes["default"] is None  # CFD: per-kernel blocks/threads; tridiag: none
    (conv,) = results.of_space(sweeps, "kernel/convolution")
    (grid,) = results.kernel_grids(conv, "h100").values()
    values = conv.plan["values"]
    assert list(grid.columns) == values["block_size_x"] and list(grid.index) == values["block_size_y"]
    fits = np.outer(grid.index, grid.columns) <= 1024  # the spec's restriction: at most 1024 threads a block
    assert (grid.notna().to_numpy() == fits).all()


def test_pairs_and_loco_tables_of_a_seven_gpu_combination():
    """The committed seven-GPU convolution folder: each GPU against every other, and leave one GPU out with
    whether the pick is within 10% and why not."""
    metrics = results.load_sweep(results.DEFAULT_RESULTS / "convolution" / "combined").metrics
    pairs = results.pairs_table(metrics)
    assert len(pairs) == 7 * 6 and set(pairs["gpu_class"]) == set(pairs["other"])
    h100 = pairs.set_index(["gpu_class", "other"]).loc[("h100", "a100")]
    assert h100["spearman"] == metrics["pairs"]["h100"]["a100"]["spearman"]
    assert h100["other_best_here_over_best"] > 1
    loco = results.loco_table(metrics)
    assert {"within_10pct", "why_not"} <= set(loco.columns) and len(loco) == 7 * 2
    within = loco[loco["within_10pct"].astype(bool)]
    missed = loco.drop(within.index)
    assert (within["picked_over_best"] <= 1.1).all() and (missed["picked_over_best"] > 1.1).all()
    assert (missed["why_not"].str.len() > 0).all()
    assert results.pairs_table(None).empty
    assert "within_10pct" not in results.loco_table({"loco": {"a": {"models": {"mlp": {"r2_test": 0.5}}}}})
