"""``launchtune combine``: sweeps of two classes into one folder, refusals, the same-split comparison
and leave-one-class-out. Sweep folders are crafted directly (a local cluster serves only the CPU class)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from launchtune.kernels.device import CLASS_SPECS
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.learn.combine import combine
from launchtune.pipeline.learn.crossclass import scores
from launchtune.pipeline.learn.design import group_split, split
from launchtune.pipeline.results.report import build_report
from launchtune.pipeline.store.folder import ok_rows
from launchtune.pipeline.store.schema import shard_schema
from launchtune.pipeline.store.shards import load_merged, write_merged
from launchtune.pipeline.store.spec import parse_spec
from tests.pipeline.conftest import base_spec, one_line_error, run_cli_here
from tests.pipeline.fake_workload import kernel_ms, make_workload

SM = {"v100": 80, "h100": 132}
BANDWIDTH = {"v100": 800.0, "h100": 2900.0}


def make_sweep(
    folder: Path,
    cls: str,
    scale: float,
    n: int = 160,
    measured_bandwidth: bool = True,
    with_plan: bool = False,
    **spec_overrides,
) -> Path:
    """A finished sweep folder of one class: sweep.json, merged/, validation.json (plan/ if asked).

    Times follow the fake workload's kernels times ``scale`` (a slower GPU), with 1% noise, so a model of one
    class ranks the other's configurations well but misses its level. The fake space holds ~66 valid
    configurations, so ``n`` rows repeat them (as repeated measurements would).
    """
    train = {"hidden_layers": [32, 32], "max_epochs": 200, **spec_overrides.pop("train", {})}
    spec = parse_spec(base_spec(samples=n, gpu_classes=[cls], train=train, **spec_overrides), "test.yaml")
    workload = make_workload(spec.case, spec.size, spec.backend, **spec.options)
    space = workload.space()
    params, kernels = space.names, ["a", "b"]
    rng = np.random.default_rng(len(cls) + int(scale * 10))
    dev = CLASS_SPECS[cls]
    rows = []
    valid = space.sample(1000, spec.seed)
    for i in range(n):
        config = valid[int(rng.integers(len(valid)))]
        a = (
            scale
            * kernel_ms(config["a.blocks"], config["a.threads"], 4, 64)
            * (1 + 0.01 * rng.standard_normal())
        )
        b = (
            scale
            * kernel_ms(config["b.blocks"], config["b.threads"], 2, 64)
            * (1 + 0.01 * rng.standard_normal())
        )
        rows.append(
            {
                "sweep_id": spec.name,
                "sample_id": i,
                "sampler": "random",
                "batch": f"{i // 10:05d}",
                "workload": spec.workload,
                "case": spec.case,
                "size": spec.size,
                "backend": spec.backend,
                "gpu_class": cls,
                "device_class": cls,
                "device_name": f"fake {cls}",
                "sm_count": SM[cls],
                "peak_fp64_gflops": dev.peak_fp64_gflops,
                "spec_bandwidth_gbs": dev.bandwidth_gbs,
                "spec_memory_gb": dev.memory_gb,
                "measured_bandwidth_gbs": BANDWIDTH[cls],
                "status": "ok",
                "reason": "",
                "verified": True,
                "repeats": spec.repeats,
                "total_ms": a + b + 0.2 * scale,
                "seed": spec.seed,
                "versions": "{}",
                "timestamp": pd.Timestamp("2026-11-23", tz="UTC"),
                **config,
                "ms.a": a,
                "ms.b": b,
            }
        )
    table = pa.Table.from_pylist(rows, schema=shard_schema(params, kernels))
    if not measured_bandwidth:  # data measured before the column existed
        table = table.drop_columns(["measured_bandwidth_gbs"])
    folder.mkdir(parents=True)
    write_merged(folder, table)
    plan = {
        "params": params,
        "values": {p.name: list(p.values) for p in space.params},
        "default": space.default,
    }
    plan["kernels"] = kernels
    (folder / "sweep.json").write_text(
        json.dumps({"spec": spec.to_dict(), "planning_key": spec.planning_key(), "plan": plan})
    )
    if with_plan:
        device = {"gpu_class": cls, "measured_bandwidth_gbs": BANDWIDTH[cls]}
        (folder / "plan").mkdir()
        (folder / "plan" / f"{cls}.json").write_text(
            json.dumps({**plan, "device": device, "configs": [["random", {}]] * len(rows)})
        )
    best = {"a.blocks": 4, "a.threads": 64, "b.blocks": 2, "b.threads": 64}
    validation = {
        cls: {
            "candidates": [
                {"config": best, "predicted_ms": 2.2 * scale, "status": "ok", "total_ms": 2.2 * scale}
            ],
            "default": {"config": space.default, "status": "ok", "total_ms": 3.0 * scale},
            "model": "additive",
            "repeats": 2,
        }
    }
    (folder / "validation.json").write_text(json.dumps(validation))
    return folder


@pytest.fixture(scope="module")
def combined(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("combine")
    v100 = make_sweep(tmp / "v100", "v100", 2.0, with_plan=True)
    h100 = make_sweep(tmp / "h100", "h100", 1.0, n=120, measured_bandwidth=False)
    out = tmp / "both"
    block = combine(out, [v100, h100], log=lambda m: None, report=build_report)
    return out, block, [v100, h100]


def test_group_split_is_each_classs_own_split():
    rows = pd.DataFrame(
        {"gpu_class": ["a"] * 40 + ["b"] * 24, "sample_id": list(range(40)) + list(range(24))}
    )
    tr, te = group_split(rows, 0.25, 3)
    assert sorted(np.concatenate([tr, te])) == list(range(64))
    for cls, offset in (("a", 0), ("b", 40)):
        own_tr, own_te = split(rows[rows.gpu_class == cls], 0.25, 3)
        assert sorted(te[rows.gpu_class.to_numpy()[te] == cls]) == sorted(own_te + offset)
        assert sorted(tr[rows.gpu_class.to_numpy()[tr] == cls]) == sorted(own_tr + offset)
    one = rows[rows.gpu_class == "a"]
    assert [list(x) for x in group_split(one, 0.25, 3)] == [list(x) for x in split(one, 0.25, 3)]
    tiny = pd.concat(
        [rows, pd.DataFrame({"gpu_class": ["c"] * 3, "sample_id": [0, 1, 2]})], ignore_index=True
    )
    tr, te = group_split(tiny, 0.25, 3)
    assert {64, 65, 66} <= set(tr) and len(te) == 10 + 6  # too few rows of c to test on: all trained on


def test_combine_gathers_data_plans_and_validation_without_duplicates(combined):
    out, block, (v100, h100) = combined
    frame = load_merged(out)
    sizes = {"h100": len(load_merged(h100)), "v100": len(load_merged(v100))}
    assert frame.groupby("gpu_class").size().to_dict() == sizes == {"h100": 120, "v100": 160}
    assert not (out / "shards").exists()  # merged holds the rows; the sources keep their shards
    # the h100 source predates measured_bandwidth_gbs and has no plan to fill it from: null, and said so
    assert frame.loc[frame.gpu_class == "h100", "measured_bandwidth_gbs"].isna().all()
    assert (frame.loc[frame.gpu_class == "v100", "measured_bandwidth_gbs"] == 800.0).all()
    assert any("h100" in n and "measured_bandwidth_gbs missing" in n for n in block["notes"])
    plan = json.loads((out / "plan/v100.json").read_text())
    assert "configs" not in plan and plan["n_configs"] == sizes["v100"] and plan["source"] == str(v100)
    validation = json.loads((out / "validation.json").read_text())
    assert set(validation) == {"v100", "h100"} and validation["h100"]["source"] == str(h100)
    meta = json.loads((out / "sweep.json").read_text())
    assert [s["classes"] for s in meta["combined"]["sources"]] == [["v100"], ["h100"]]
    assert meta["spec"]["gpu_classes"] == ["h100", "v100"]
    assert meta["combined"]["command"] == f"launchtune combine {out} {v100} {h100}"


def test_combined_and_per_class_models_are_scored_on_the_same_rows(combined):
    out, _, _ = combined
    metrics = json.loads((out / "models/metrics.json").read_text())
    groups = metrics["groups"]
    entry = groups["combined"]
    # the rows' facts, then the registry's facts of each class (FP32 peak, last-level cache, vendor)
    assert entry["features"][-8:] == [
        "peak_fp64_gflops",
        "spec_bandwidth_gbs",
        "spec_memory_gb",
        "sm_count",
        "peak_fp32_gflops",
        "llc_mb",
        "vendor_nvidia",
        "vendor_amd",
    ]
    assert "measured_bandwidth_gbs" in entry["dropped_features"] and entry["target"] == "log(ms)"
    assert (
        groups["v100"]["features"]
        == groups["h100"]["features"]
        == ["a.blocks", "a.threads", "b.blocks", "b.threads"]
    )
    # the combined model's test rows are the union of the classes' test rows
    n_test = [groups[c]["models"]["mlp"]["n_test"] for c in ("v100", "h100")]
    assert entry["models"]["mlp"]["n_test"] == sum(n_test)
    for cls in ("v100", "h100"):
        c = metrics["comparison"][cls]
        own = groups[cls]["models"]
        assert c["n_test"] == own["mlp"]["n_test"]
        for name in ("mlp", "gbr"):  # the per-class side recomputed on the class's test rows = its own score
            assert c["per_class"][name]["r2"] == pytest.approx(own[name]["r2_test"], abs=1e-12)
            assert c["per_class"][name]["mse"] == pytest.approx(own[name]["mse_test"], rel=1e-12)
        assert c["combined"]["gbr"]["r2"] > 0.8 and c["combined"]["gbr"]["spearman"] > 0.8
    frame = load_merged(out)
    rows = ok_rows(frame, None)
    _, te = group_split(rows, metrics["test_fraction"], metrics["seed"])
    assert len(te) == entry["models"]["gbr"]["n_test"]


def test_leave_one_class_out_ranks_the_unseen_class(combined):
    out, _, _ = combined
    metrics = json.loads((out / "models/metrics.json").read_text())
    loco, groups = metrics["loco"], metrics["groups"]
    assert set(loco) == {"v100", "h100"}
    for held, other in (("v100", "h100"), ("h100", "v100")):
        e = loco[held]
        assert e["trained_on"] == [other] and e["n_test"] == groups[held]["rows"]
        assert len(e["constant_in_training"]) == 8 and e["device_features"] == [] and "constant" in e["note"]
        for m in e["models"].values():
            assert m["n"] == e["n_test"] and m["non_finite_predictions"] == 0
            assert 1.0 <= m["picked_over_best"] and m["picked_ms"] >= m["best_ms"]
            assert 0 <= m["picked_percentile"] <= 100 and m["median_over_best"] > 1
        # same shape, another level: the ranking transfers, the absolute error does not
        gbr = e["models"]["gbr"]
        assert gbr["spearman"] > 0.8 and gbr["picked_over_best"] < gbr["median_over_best"]
        assert gbr["r2_test"] < 0.5
    report = (out / "report.md").read_text()
    assert "## Combined vs per-class on the same test rows" in report and "## Leave one class out" in report
    assert "nothing was re-measured here" in report
    rep = json.loads((out / "report.json").read_text())
    assert set(rep["loco"]) == {"v100", "h100"} and rep["classes"]["h100"]["default_measured_ms"] == 3.0


def test_scores_rank_and_pick():
    y = np.array([3.0, 1.0, 2.0, 4.0])
    exact = scores(y, y)
    assert exact["r2"] == 1 and exact["spearman"] == 1 and exact["picked_over_best"] == 1
    assert exact["picked_percentile"] == 0 and exact["median_over_best"] == 2.5
    doubled = scores(y, 2 * y)  # right ranking, wrong level
    assert doubled["spearman"] == 1 and doubled["r2"] < 0 and doubled["picked_ms"] == 1
    wrong = scores(y, -y)
    assert wrong["spearman"] == -1 and wrong["picked_ms"] == 4 and wrong["picked_percentile"] == 75
    flat = scores(y, np.ones(4))
    assert np.isnan(flat["spearman"])
    # the fastest of the TOP_K (10) rows predicted fastest: here the ranking puts the best row 11th
    many = np.arange(1.0, 13.0)
    pred = many.copy()
    pred[0] = 20.0  # the best row (1.0) ranked last
    assert scores(many, pred)["top_k_over_best"] == 2.0 and scores(many, many)["top_k_over_best"] == 1.0
    overflow = scores(y, np.array([np.inf, 1.0, 2.0, 3.0]))  # exp() of an extrapolated log prediction
    assert overflow["non_finite_predictions"] == 1 and np.isnan(overflow["r2"]) and overflow["picked_ms"] == 1


@pytest.mark.slow
def test_combine_is_deterministic_and_a_rerun_replaces_its_output(combined, tmp_path):
    out, _, sources = combined
    again = tmp_path / "again"
    combine(again, sources, log=lambda m: None, report=build_report)
    a, b = (json.loads((d / "models/metrics.json").read_text()) for d in (out, again))
    for m in (a, b):
        for g in m["groups"].values():
            for s in g["models"].values():
                s.pop("fit_seconds")
        for e in m["loco"].values():
            for s in e["models"].values():
                s.pop("fit_seconds")
    assert a == b
    pd.testing.assert_frame_equal(load_merged(out), load_merged(again))
    (again / "PROVENANCE.md").write_text("kept")
    combine(again, sources, log=lambda m: None, train=False)
    assert (again / "PROVENANCE.md").read_text() == "kept" and not (again / "models").exists()


def test_measured_bandwidth_is_filled_from_the_plan_where_the_data_lacks_it(tmp_path):
    a = make_sweep(tmp_path / "a", "v100", 2.0, n=40, measured_bandwidth=False, with_plan=True)
    b = make_sweep(tmp_path / "b", "h100", 1.0, n=40)
    block = combine(tmp_path / "out", [a, b], log=lambda m: None, train=False)
    frame = load_merged(tmp_path / "out")
    assert (frame.loc[frame.gpu_class == "v100", "measured_bandwidth_gbs"] == 800.0).all()
    assert any("filled from" in n for n in block["notes"])


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (dict(cls="v100"), "GPU class 'v100' is also in"),
        (dict(size="16x4"), "planning_key.size is '16x4', but '8x4'"),
        (dict(case="other"), "planning_key.case"),
        (dict(options={"delay": 0.0}), "planning_key.options"),
        (dict(check=False), "planning_key.check"),
    ],
)
def test_combine_refuses_sources_that_do_not_belong_together(tmp_path, second, message):
    a = make_sweep(tmp_path / "a", "v100", 2.0, n=20)
    cls = second.pop("cls", "h100")
    b = make_sweep(tmp_path / "b", cls, 1.0, n=20, **second)
    with pytest.raises(UserError, match=message):
        combine(tmp_path / "out", [a, b], log=lambda m: None)
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_combine_may_differ_in_backend_budget_and_seed(tmp_path):
    a = make_sweep(tmp_path / "a", "v100", 2.0, n=20, repeats=3, batch_size=5)
    b = make_sweep(
        tmp_path / "b",
        "h100",
        1.0,
        n=30,
        backend="cupy",
        samplers=["random", "per_kernel_exhaustive"],
        seed=4,
    )
    combine(tmp_path / "out", [a, b], log=lambda m: None, train=False)
    assert json.loads((tmp_path / "out/sweep.json").read_text())["spec"]["backend"] == "mixed"


def test_combine_refuses_another_launch_space_and_bad_folders(tmp_path):
    a = make_sweep(tmp_path / "a", "v100", 2.0, n=20)
    b = make_sweep(tmp_path / "b", "h100", 1.0, n=20)
    meta = json.loads((b / "sweep.json").read_text())
    meta["plan"]["values"]["a.blocks"] = [1, 2]
    (b / "sweep.json").write_text(json.dumps(meta))
    with pytest.raises(UserError, match="plan.values differs"):
        combine(tmp_path / "out", [a, b], log=lambda m: None)
    with pytest.raises(UserError, match="at least two"):
        combine(tmp_path / "out", [a], log=lambda m: None)
    with pytest.raises(UserError, match="named twice"):
        combine(tmp_path / "out", [a, a], log=lambda m: None)
    c = make_sweep(tmp_path / "c", "h100", 1.0, n=20)
    with pytest.raises(UserError, match="outside every source"):
        combine(a / "sub", [a, c], log=lambda m: None)
    with pytest.raises(UserError, match="holds a measured sweep"):
        combine(c, [a, make_sweep(tmp_path / "d", "h100", 1.0, n=20)], log=lambda m: None)
    with pytest.raises(UserError, match="no such sweep folder"):
        combine(tmp_path / "out", [a, tmp_path / "missing"], log=lambda m: None)


@pytest.mark.slow
def test_combine_cli_end_to_end_and_its_one_line_error(tmp_path):
    a = make_sweep(tmp_path / "a", "v100", 2.0, n=40)
    b = make_sweep(tmp_path / "b", "h100", 1.0, n=40)
    result = run_cli_here("combine", str(tmp_path / "out"), str(a), str(b), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "leave out v100:" in result.stdout and (tmp_path / "out/report.md").is_file()
    error = one_line_error(
        run_cli_here("combine", str(tmp_path / "out2"), str(a), str(a.parent / "a"), cwd=tmp_path)
    )
    assert "named twice" in error
