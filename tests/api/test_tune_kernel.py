"""``launchtune.tune_kernel`` on the CPU: numpy arrays in, a sweep folder and a result out, on the caller's
own Dask cluster, which is left running. The kernel workload stands on a fake CuPy (``tests.api.stand_in``),
whose launch times are known, so the pick can be checked."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import yaml

import launchtune
from launchtune import api
from launchtune.kernels.kernel.spec import load_kernel_spec
from launchtune.pipeline.errors import UserError
from tests.api.stand_in import fake_ms
from tests.kernel.conftest import SOURCE

N = 1000


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setattr(api, "KERNEL_WORKLOAD", "tests.api.stand_in:make")


def _arrays():
    data = np.random.default_rng(7).uniform(-1, 1, N).astype(np.float32)
    return [np.zeros(N, np.float32), data, np.int32(N)], data


@pytest.mark.slow
def test_tune_kernel_on_the_callers_cluster(tmp_path, client, stand_in):
    arguments, data = _arrays()
    tune_params = {"block_size_x": [32, 64, 128], "tile": [1, 2, 4], "wrong": [0, 1]}
    result = launchtune.tune_kernel(
        "scale",
        SOURCE,
        N,
        arguments,
        tune_params,
        restrictions=[
            "block_size_x * tile <= 256",
            lambda p: not (p["block_size_x"] == 32 and p["tile"] == 4),
        ],
        grid_div_x=["block_size_x", "tile"],
        answer=[2 * data, None, None],
        cluster=client,
        out=tmp_path / "out",
        seed=3,
        metrics={"per_ms": lambda p: 1 / p["time"]},  # run here, after measuring
        cache=tmp_path / "kt_cache",  # Kernel Tuner's cache file, ".json" added
    )
    # every combination the restrictions allow, measured once; a wrong answer is an invalid row
    valid = [
        {"block_size_x": b, "tile": t, "wrong": w}
        for b in (32, 64, 128) for t in (1, 2, 4) for w in (0, 1)
        if b * t <= 256 and not (b == 32 and t == 4)
    ]  # fmt: skip
    rows = result.rows
    assert len(rows) == len(valid) == 14
    assert sorted(map(tuple, rows[list(tune_params)].to_numpy().tolist())) == sorted(
        tuple(c.values()) for c in valid
    )
    assert set(rows.loc[rows["wrong"] == 1, "status"]) == {"invalid"}
    assert set(rows.loc[rows["wrong"] == 0, "status"]) == {"ok"}
    ok = rows[rows["status"] == "ok"]
    assert np.allclose(ok["total_ms"], [fake_ms(c) for c in ok[list(tune_params)].to_dict("records")])
    # the pick: the fastest correct configuration (the wrong ones are faster still, and never picked)
    assert result.best == {"block_size_x": 64, "tile": 2, "wrong": 0}
    assert result.best_ms == pytest.approx(1.0) and result.gpu_classes == ["cpu"]
    assert launchtune.load(tmp_path / "out").best == result.best
    # Kernel Tuner's pair: every row a dict of its parameters and time (an error's name where it failed)
    results, env = result
    assert len(results) == 14 and env["best_config"]["time"] == pytest.approx(1.0)
    assert {k: env["best_config"][k] for k in tune_params} == result.best
    assert sorted(r["time"] for r in results if r["wrong"] == 1) == ["InvalidConfig"] * 7
    assert json.loads(json.dumps(result))[1]["problem_size"] == N
    assert all(r["per_ms"] == pytest.approx(1 / r["time"]) for r in results if r["wrong"] == 0)
    cache = json.loads((tmp_path / "kt_cache.json").read_text())
    assert cache["tune_params_keys"] == list(tune_params) and len(cache["cache"]) == 14
    assert cache["cache"]["64,2,0"]["time"] == pytest.approx(1.0)
    # the caller's cluster is still up and usable
    assert client.status == "running" and client.submit(lambda x: x + 1, 1).result() == 2
    assert len(client.scheduler_info()["workers"]) == 1

    # what was written: the arrays as .npy, a kernel spec the loader checks, a sweep spec the CLI runs
    (inputs,) = (tmp_path / "out" / "inputs").iterdir()
    spec = load_kernel_spec(inputs / "kernel.yaml")
    assert np.array_equal(np.load(inputs / "arg1.npy"), data)
    assert np.array_equal(np.load(spec.arguments[0].answer), 2 * data)
    assert [a.output for a in spec.arguments] == [True, False, False]
    assert len(np.load(inputs / "allowed.npy")) == 2 * 8  # the function's verdict on all 18 combinations
    sweep = yaml.safe_load((inputs / "sweep.yaml").read_text())
    assert sweep["samplers"] == ["exhaustive"] and sweep["seed"] == 3 and sweep["repeats"] == 7

    # Kernel Tuner's cache of the measured rows
    (path,) = result.to_kernel_tuner_cache(tmp_path / "scale.json.gz")
    cache = json.loads(gzip.decompress(path.read_bytes()))
    assert cache["tune_params_keys"] == list(tune_params) and len(cache["cache"]) >= len(ok)


@pytest.mark.slow
def test_changed_arrays_are_another_sweep(tmp_path, client, stand_in):
    """The same folder with other arrays: refused (its rows would mix two inputs), unless force."""
    arguments, data = _arrays()
    call = dict(kernel_name="scale", kernel_source=SOURCE, problem_size=N,
                tune_params={"block_size_x": [32, 64], "tile": [2]}, cluster=client,
                out=tmp_path / "out")  # fmt: skip
    first = launchtune.tune_kernel(arguments=arguments, **call)
    assert first.best == {"block_size_x": 64, "tile": 2}
    arguments[1] = data + 1
    with pytest.raises(UserError, match=r"this folder holds a sweep planned with options=.*--force"):
        launchtune.tune_kernel(arguments=arguments, **call)
    # the cluster object rather than a client: a client is made for the sweep and closed, the cluster kept
    again = launchtune.tune_kernel(arguments=arguments, force=True, **{**call, "cluster": client.cluster})
    assert len(again.rows) == 2 and len(list((tmp_path / "out" / "inputs").iterdir())) == 2
    assert client.cluster.status.name == "running" and client.submit(sum, [1, 2]).result() == 3


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"kernel_name": "nope"}, ValueError, r"kernel_name: no '__global__ \.\.\. nope\('"),
        ({"problem_size": (0,)}, ValueError, "problem_size: expected one to three positive integers"),
        ({"tune_params": {"block_size_x": [32.5]}}, ValueError, r"tune_params\['block_size_x'\]"),
        ({"arguments": [np.zeros(N, np.complex64)]}, TypeError, r"arguments\[0\]: dtype complex64"),
        ({"arguments": [[1, 2, 3]]}, TypeError, r"arguments\[0\]: expected a numpy array or a numpy scalar"),
        ({"answer": [None]}, ValueError, "answer: 1 entries for 3 arguments"),
        ({"restrictions": [lambda a, b: True]}, TypeError, "must take one argument"),
        ({"restrictions": [lambda p: False]}, ValueError, "no configuration satisfies"),
    ],
)
def test_bad_arguments_are_one_line_before_anything_runs(tmp_path, change, error, match):
    arguments, _ = _arrays()
    call = dict(kernel_name="scale", kernel_source=SOURCE, problem_size=N, arguments=arguments,
                tune_params={"block_size_x": [32, 64]}, out=tmp_path / "out")  # fmt: skip
    with pytest.raises(error, match=match):
        launchtune.tune_kernel(**{**call, **change})
    assert not (tmp_path / "out").exists()


def test_a_search_without_a_budget_spends_the_default(tmp_path, monkeypatch):
    """``strategy`` without ``budget``: the sweep spec written names no budget, so the search spends the
    spec's default; with one, that one."""
    from launchtune.pipeline.store.spec import DEFAULT_BUDGET, load_spec

    searches = []
    monkeypatch.setattr(api, "sweep", lambda spec, **kw: searches.append(load_spec(spec).search))
    monkeypatch.setattr(api, "_check_gpu", lambda cluster: None)
    monkeypatch.setattr(api, "_kernel_tuner_pair", lambda *a: None)
    arguments, _ = _arrays()
    call = dict(kernel_name="scale", kernel_source=SOURCE, problem_size=N, arguments=arguments,
                tune_params={"block_size_x": [32, 64]}, strategy="evolve")  # fmt: skip
    launchtune.tune_kernel(**call, out=tmp_path / "default")
    launchtune.tune_kernel(**call, budget=20, out=tmp_path / "twenty")
    assert [(s.strategy, s.budget) for s in searches] == [("evolve", DEFAULT_BUDGET), ("evolve", 20)]


def test_constant_memory_passed_or_not(tmp_path):
    """``cmem_args``: an array that is also an argument is passed and copied; another is copied only."""
    arguments, data = _arrays()
    table = np.arange(4, dtype=np.float32)
    files = api._Writer()
    entries = api._arguments(arguments, None, {"d_in": arguments[1], "d_table": table}, files)
    assert [(e["name"], e.get("constant"), e.get("argument", True)) for e in entries] == [
        ("arg0", None, True),
        ("arg1", "d_in", True),
        ("arg2", None, True),
        ("cmem_d_table", "d_table", False),
    ]
    assert entries[2] == {"name": "arg2", "dtype": "int32", "value": "1000"}
    files.write(tmp_path)
    assert np.array_equal(np.load(tmp_path / entries[3]["fill"]["npy"]), table)
    assert np.array_equal(np.load(tmp_path / "arg1.npy"), data)


def test_metrics_objective_and_text_values_reach_the_kernel_spec(tmp_path, monkeypatch):
    """Kernel Tuner's ``metrics``, ``objective`` and ``objective_higher_is_better``, and float and text
    parameter values, become the kernel spec's keys, which its loader reads back; without a GPU the sweep
    then refuses in one line."""
    from launchtune.kernels.kernel.spec import load_kernel_spec

    monkeypatch.setattr(api, "sweep", lambda *a, **k: None)  # the inputs are what is checked here
    monkeypatch.setattr(api, "_check_gpu", lambda cluster: None)
    monkeypatch.setattr(api, "_kernel_tuner_pair", lambda *a: None)
    arguments, _ = _arrays()
    launchtune.tune_kernel(
        "scale", SOURCE, N, arguments, {"block_size_x": [32, 64], "tile": [1, 2], "scale": [0.5, 2.0]},
        metrics={"gb_s": "2 * 4 * problem_size_x / (time * 1e6)"}, objective="gb_s",
        objective_higher_is_better=True, out=tmp_path / "out",
    )  # fmt: skip
    (inputs,) = (tmp_path / "out" / "inputs").iterdir()
    spec = load_kernel_spec(inputs / "kernel.yaml")
    assert spec.objective.name == "gb_s" and spec.objective.maximize
    assert [name for name, _ in spec.metrics] == ["gb_s"] and spec.labels["scale"] == (0.5, 2.0)
    # a metric as a Python function runs in this process after measuring: it is not in the kernel spec
    launchtune.tune_kernel("scale", SOURCE, N, arguments, {"block_size_x": [32]},
                           metrics={"gb_s": lambda p: 1.0, "gb": "2 * time"},
                           out=tmp_path / "other")  # fmt: skip
    (inputs,) = (tmp_path / "other" / "inputs").iterdir()
    assert [name for name, _ in load_kernel_spec(inputs / "kernel.yaml").metrics] == ["gb"]
