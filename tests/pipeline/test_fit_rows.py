"""What the models are fitted on: the leave-one-class-out MLP's rows capped per class (``train.loco_rows``),
the row counts stated, and the same sources giving the same numbers and predictions on a second run."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.learn.combine import combine
from launchtune.pipeline.learn.design import capped, design, model_makers
from launchtune.pipeline.learn.models import load_model, loss_curve
from launchtune.pipeline.results.report import build_report
from launchtune.pipeline.store.folder import ok_rows
from launchtune.pipeline.store.shards import load_merged
from launchtune.pipeline.store.spec import parse_spec
from tests.pipeline.conftest import base_spec
from tests.pipeline.test_combine import make_sweep


def test_capped_keeps_a_seeded_draw_of_each_class_over_the_cap_in_order():
    rows = pd.DataFrame({"gpu_class": ["a"] * 50 + ["b"] * 10})
    pos = np.random.default_rng(1).permutation(60)
    out = capped(rows, pos, 20, seed=3)
    cls = rows["gpu_class"].to_numpy()
    a, b = out[cls[out] == "a"], out[cls[out] == "b"]
    assert len(a) == 20 and len(set(a)) == 20 and set(a) <= set(range(50))
    assert sorted(b) == list(range(50, 60))  # under the cap: every row
    order = {p: i for i, p in enumerate(pos)}
    assert [order[p] for p in out] == sorted(order[p] for p in out)  # the given order is kept
    # a class's draw depends on its own positions only: the same alone as beside another class
    assert list(capped(rows, pos[cls[pos] == "a"], 20, seed=3)) == list(a)
    assert list(capped(rows, pos, 20, seed=3)) == list(out)
    assert list(capped(rows, pos, 20, seed=4)) != list(out)
    assert list(capped(rows, pos, None, seed=3)) == list(pos)


def test_loco_rows_in_the_spec():
    assert parse_spec(base_spec(), "s.yaml").train.loco_rows == 2000
    assert parse_spec(base_spec(train={"loco_rows": None}), "s.yaml").train.loco_rows is None
    assert parse_spec(base_spec(train={"loco_rows": 500}), "s.yaml").train.loco_rows == 500
    with pytest.raises(UserError, match="train.loco_rows"):
        parse_spec(base_spec(train={"loco_rows": 5}), "s.yaml")


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fit_rows")
    train = {"loco_rows": 100, "max_epochs": 30}
    return tmp, [
        make_sweep(tmp / "v100", "v100", 2.0, n=160, train=train),
        make_sweep(tmp / "h100", "h100", 1.0, n=120, train=train),
    ]


def test_the_loco_mlp_is_fitted_on_at_most_loco_rows_of_each_class_and_says_so(sources):
    tmp, paths = sources
    out = tmp / "capped"
    combine(out, paths, log=lambda m: None, report=build_report)
    metrics = json.loads((out / "models" / "metrics.json").read_text())
    n = {g: {m: s["n_train"] for m, s in e["models"].items()} for g, e in metrics["groups"].items()}
    # the groups' models see every training row (75% of 160 and of 120)
    assert n == {
        "v100": {"mlp": 120, "gbr": 120, "additive": 120},
        "h100": {"mlp": 90, "gbr": 90, "additive": 90},
        "combined": {"mlp": 210, "gbr": 210},
    }
    # leave one class out: trained on every row of the other class, the MLP on at most 100 of them
    loco = metrics["loco"]
    assert {m: s["n_train"] for m, s in loco["h100"]["models"].items()} == {"mlp": 100, "gbr": 160}
    assert {m: s["n_train"] for m, s in loco["v100"]["models"].items()} == {"mlp": 100, "gbr": 120}
    report = (out / "report.md").read_text()
    assert "| h100 | v100 | mlp | 100 | 120 |" in report and "| v100 | mlp | 120 |" in report


def _scores(obj):
    """Every number of metrics.json but the fit times (wall clock)."""
    if isinstance(obj, dict):
        return {k: _scores(v) for k, v in obj.items() if k != "fit_seconds"}
    if isinstance(obj, list):
        return [_scores(v) for v in obj]
    return obj


def test_combine_twice_gives_the_same_numbers_and_predictions(sources, monkeypatch):
    import launchtune.pipeline.learn.parallel as parallel

    tmp, paths = sources
    runs = []
    for name, cores in (("one", None), ("two", 1)):
        if cores:  # the second run fits everything in this one process, no pool
            monkeypatch.setattr(parallel, "cpu_count", lambda n=cores: n)
        out = tmp / name
        combine(out, paths, log=lambda m: None, report=build_report)
        metrics = json.loads((out / "models" / "metrics.json").read_text())
        rows = ok_rows(load_merged(out), None)
        predictions = {}
        for group, entry in metrics["groups"].items():
            X = design(rows if group == "combined" else ok_rows(rows, group), entry["features"])
            for model in entry["models"]:
                predictions[group, model] = load_model(out / "models" / group / f"{model}.skops").predict(X)
        report = json.loads((out / "report.json").read_text())
        runs.append((_scores(metrics), predictions, _scores(report["classes"]), report["models"]))
    (m1, p1, c1, r1), (m2, p2, c2, r2) = runs
    assert m1 == m2 and c1 == c2 and r1 == r2
    assert p1.keys() == p2.keys() and len(p1) == 8
    for key in p1:
        assert np.array_equal(p1[key], p2[key]), key  # bit for bit
    assert m1["loco"]["h100"]["models"]["mlp"]["r2_test"] is not None  # real scores were compared


def test_inactive_parameters_are_zeroed_for_fitting_and_every_prediction(tmp_path):
    """A model told that 'b' is unused where 'a' == 1 predicts the same whatever 'b' holds there, and its
    skops file loads back with the trusted list (ZeroInactive is in TRUSTED)."""
    from launchtune.pipeline.learn.models import ZeroInactive, save_model, with_inactive_zeroed

    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(0, 2, 400), rng.integers(0, 50, 400), rng.normal(size=400)])
    y = X[:, 2] + np.where(X[:, 0] == 0, X[:, 1] / 10, 0.0)  # b matters only where a == 0
    rules = [["a", [1], ["b"]]]
    zero = ZeroInactive(["a", "b", "c"], rules)
    assert (zero.transform(X)[X[:, 0] == 1, 1] == 0).all()
    assert (zero.transform(X)[X[:, 0] == 0] == X[X[:, 0] == 0]).all()
    spec = parse_spec(base_spec(), "s.yaml")
    for name, make in model_makers(spec, 400, False, ["a", "b", "c"], rules).items():
        model = make().fit(X, y)
        shifted = X.copy()
        shifted[X[:, 0] == 1, 1] += 17
        assert np.array_equal(model.predict(X), model.predict(shifted)), name
        path = tmp_path / f"{name}.skops"
        save_model(model, path)
        assert np.array_equal(load_model(path).predict(X), model.predict(X))
    mlp = model_makers(spec, 400, False, ["a", "b", "c"], rules)["mlp"]().fit(X, y)
    assert loss_curve(mlp)  # the MLP is still the pipeline's last step
    assert with_inactive_zeroed("model", ["a"], ()) == "model"  # no rules: the model as it was
