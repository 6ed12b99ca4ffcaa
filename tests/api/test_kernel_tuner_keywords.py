"""Kernel Tuner 1.5's keywords on ``launchtune.tune_kernel``: each has its meaning or is refused in one line
naming it, every argument is checked at the call, and without a GPU the call stops in one line before
anything is written. The sweep itself is not run here (``api.sweep`` is replaced): what is checked is what
the call would hand it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

import launchtune
from launchtune import api
from tests.kernel.conftest import SOURCE

N = 1000
PAIR = api._kernel_tuner_pair


class NVMLObserver:  # Kernel Tuner's, as far as tune_kernel reads it (its own needs pynvml and a GPU)
    def __init__(self, observables):
        self.observables = [o for o in observables if o not in ("nvml_energy", "nvml_power")]
        self.continuous_observer = type(
            "C", (), {"observables": [o for o in observables if o.startswith("nvml")]}
        )  # the fixture below stands it aside; the resume test calls it


def _call(tmp_path, **change):
    arguments = [np.zeros(N, np.float32), np.ones(N, np.float32), np.int32(N)]
    call = dict(kernel_name="scale", kernel_source=SOURCE, problem_size=N, arguments=arguments,
                tune_params={"block_size_x": [32, 64], "tile": [1, 2]}, out=tmp_path / "out")  # fmt: skip
    return launchtune.tune_kernel(**{**call, **change})


@pytest.fixture
def written(tmp_path, monkeypatch):
    """The kernel spec and sweep spec a call writes (the sweep is not run)."""
    monkeypatch.setattr(api, "_check_gpu", lambda cluster: None)
    monkeypatch.setattr(api, "sweep", lambda *a, **k: None)
    monkeypatch.setattr(api, "_kernel_tuner_pair", lambda *a: None)

    def specs(**change):
        import shutil

        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        _call(tmp_path, **change)
        (inputs,) = (tmp_path / "out" / "inputs").iterdir()
        return (yaml.safe_load((inputs / n).read_text()) for n in ("kernel.yaml", "sweep.yaml"))

    return specs


def test_without_a_gpu_one_line_and_nothing_written(tmp_path, monkeypatch):
    monkeypatch.setattr("launchtune.kernels.backend.gpu_count", lambda: 0)
    with pytest.raises(api.NoGPUError, match=r"^no GPU here \(CuPy sees none\).*simulation_mode=True"):
        _call(tmp_path)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"force": "no"}, TypeError, r"^force: expected True or False, got 'no'$"),
        ({"quiet": 1}, TypeError, "^quiet: expected True or False"),
        ({"iterations": 0}, ValueError, "^iterations: expected an integer from 1 to 10000, got 0"),
        ({"iterations": "7"}, TypeError, "^iterations: expected an integer"),
        ({"atol": "abc"}, TypeError, "^atol: expected a finite number >= 0"),
        ({"atol": float("nan")}, ValueError, "^atol: expected a finite number >= 0"),
        ({"problem_size": None}, TypeError, "^problem_size: expected"),
        ({"problem_size": True}, TypeError, "^problem_size: expected"),
        ({"problem_size": (True, 4)}, ValueError, "^problem_size: expected one to three positive integers"),
        ({"restrictions": {"block_size_x > 32": 1}}, TypeError, "^restrictions: expected"),
        ({"metrics": []}, TypeError, "^metrics: expected a dict"),
        ({"metrics": 0}, TypeError, "^metrics: expected a dict"),
        ({"metrics": {"m": 5}}, TypeError, "^metrics: expected a dict of name to an expression string"),
        ({"arguments": None}, TypeError, "^arguments: expected a list"),
        ({"restrictions": 5}, TypeError, "^restrictions: expected"),
        ({"cmem_args": 5}, TypeError, "^cmem_args: expected"),
        ({"answer": 5}, TypeError, "^answer: expected"),
        ({"cache": 5}, TypeError, "^cache: expected"),
        ({"out": 5}, TypeError, "^out: expected"),
        ({"gpu_classes": 5}, TypeError, "^gpu_classes: expected"),
        (
            {"objective_higher_is_better": "no"},
            TypeError,
            "^objective_higher_is_better: expected True or False",
        ),
        (
            {"lang": "OpenCL"},
            ValueError,
            r"^lang=: launchtune compiles CUDA .*Kernel Tuner itself for OpenCL",
        ),
        ({"texmem_args": {"t": 1}}, ValueError, "^texmem_args=: texture memory"),
        (
            {"verify": lambda a, b, atol=None: True, "cluster": "slurm"},
            ValueError,
            r"^verify=: a Python function runs only where one local GPU measures in this process",
        ),
        ({"kernel_source": lambda p: 5}, TypeError, "^kernel_source: the generator returned int for"),
        (
            {"grid_div_x": lambda p: 32, "cluster": "slurm"},
            ValueError,
            "^grid_div_x=: a function runs only where one local GPU measures in this process",
        ),
        (
            {"problem_size": lambda p: 1000, "cluster": "slurm"},
            ValueError,
            "^problem_size=: a function runs only where one local GPU",
        ),
        ({"strategy_options": {"popsize": 4}}, ValueError, "^strategy_options=: 'popsize'"),
        ({"observers": [object()]}, ValueError, r"^observers=: object \(all\): only NVML"),
        (
            {"observers": [NVMLObserver(["nvml_energy", "core_freq"])]},
            ValueError,
            r"^observers=: NVMLObserver \(core_freq\): only NVML's nvml_energy and nvml_power",
        ),
        ({"simulation_mode": True}, ValueError, "^simulation_mode=: replays a Kernel Tuner cache"),
        ({"device": 1}, ValueError, "^device=: "),
    ],
)
def test_each_argument_is_checked_at_the_call(tmp_path, change, error, match):
    with pytest.raises(error, match=match):
        _call(tmp_path, **change)
    assert not (tmp_path / "out").exists()


def test_kernel_tuner_keywords_reach_the_specs(written, tmp_path):
    kernel, sweep = written(
        compiler_options="--use_fast_math", defines={"SCALE": 2}, grid_div_x=[], answer=None,
        restrictions=["block_size_x * tile >= 128"], iterations=32, strategy_options={"max_fevals": 3},
        verbose=True, quiet=True, lang="cupy",
    )  # fmt: skip
    assert kernel["compiler_options"] == ["--use_fast_math", "-DSCALE=2"]  # a string is one option
    assert kernel["grid_div_x"] == ["1"]  # Kernel Tuner's []: nothing divides the problem size
    assert not any(a.get("output") for a in kernel["arguments"])  # answer=None: nothing is checked
    # no default=: the first configuration the restrictions allow, not the first values
    assert kernel["default"] == {"block_size_x": 64, "tile": 2}
    assert sweep["repeats"] == 32 and sweep["samplers"] == ["random"] and sweep["samples"] == 3
    kernel, sweep = written(default={"block_size_x": 32, "tile": 2}, problem_size="tile", grid_div_x=[])
    assert kernel["default"] == {"block_size_x": 32, "tile": 2} and kernel["problem_size"] == ["tile"]
    assert sweep["size"] == "1"  # a problem size of the parameters is the launch's, per configuration
    from launchtune.pipeline.store.spec import load_spec

    (inputs,) = (tmp_path / "out" / "inputs").iterdir()
    assert load_spec(inputs / "sweep.yaml").size == "1"  # the sweep spec's loader takes it


def test_each_call_its_own_folder_the_same_call_resumes(tmp_path, monkeypatch):
    """Without ``out``: ``results/<kernel>-<hash of the inputs>``, so a second, different call in one
    script is its own sweep and the same call again is the same folder."""
    monkeypatch.setenv("LAUNCHTUNE_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(api, "_check_gpu", lambda cluster: None)
    folders = []
    monkeypatch.setattr(api, "sweep", lambda spec, **kw: folders.append(kw["out"]))
    monkeypatch.setattr(api, "_kernel_tuner_pair", lambda *a: None)
    for tile in ([1, 2], [4], [1, 2]):
        _call(tmp_path, out=None, tune_params={"block_size_x": [32, 64], "tile": tile})
    assert folders[0] == folders[2] != folders[1] and folders[0].name.startswith("scale-")


def test_simulation_mode_replays_a_cache_without_a_gpu(tmp_path, monkeypatch):
    """A Kernel Tuner cache (written by hand here: the mechanism, not a measurement) replayed with the
    restrictions and metrics of the call, no GPU asked for and nothing written."""
    monkeypatch.setattr("launchtune.kernels.backend.gpu_count", lambda: 0)
    entries = {
        f"{b},{t}": {"block_size_x": b, "tile": t, "time": 1.0 + b / 64 + t, "times": [1.0]}
        for b in (32, 64, 128) for t in (1, 2)
    }  # fmt: skip
    entries["64,2"]["time"] = "InvalidConfig"
    cache = tmp_path / "scale.json"
    cache.write_text(json.dumps({"kernel_name": "scale", "device_name": "X", "tune_params_keys":
                                 ["block_size_x", "tile"], "cache": entries}))  # fmt: skip
    results, env = _call(
        tmp_path, cache=tmp_path / "scale", simulation_mode=True,
        restrictions=[lambda p: p["tile"] == 2 or p["block_size_x"] == 32],
        metrics={"per_ms": lambda p: 1 / p["time"]}, objective="per_ms", objective_higher_is_better=True,
    )  # fmt: skip
    assert [(r["block_size_x"], r["tile"]) for r in results] == [(32, 1), (32, 2), (64, 2)]
    assert env["best_config"]["block_size_x"] == 32 and env["best_config"]["tile"] == 1
    assert "per_ms" not in results[2] and env["simulation"] is True
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: launchtune.sweep("x.yaml", force="no"), "^force: expected True or False, got 'no'$"),
        (lambda: launchtune.sweep("x.yaml", samples="3"), "^samples: expected an integer >= 0"),
        (lambda: launchtune.sweep("x.yaml", prior=[7]), "^prior: expected a list of sweep folders"),
        (lambda: launchtune.sweep("x.yaml", max_minutes=float("nan")), "^max_minutes: expected a finite"),
        (lambda: launchtune.sweep(5), "^spec: expected a sweep spec's path or its mapping"),
        (lambda: launchtune.load(5), "^folder: expected a folder"),
    ],
)
def test_sweep_and_load_check_their_arguments(call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call()


def test_run_kernel_without_a_gpu_is_one_line(monkeypatch):
    monkeypatch.setattr("launchtune.kernels.backend.gpu_count", lambda: 0)
    arguments = [np.zeros(N, np.float32), np.ones(N, np.float32), np.int32(N)]
    with pytest.raises(api.NoGPUError, match="^no GPU here"):
        launchtune.run_kernel("scale", SOURCE, N, arguments, {"block_size_x": 32}, grid_div_x=[])
    with pytest.raises(ValueError, match="^lang=: "):
        launchtune.run_kernel("scale", SOURCE, N, arguments, {"block_size_x": 32}, lang="C")


def test_a_float_parameter_with_a_restriction_function_keeps_its_values(written, tmp_path):
    """``f`` in [0.5, 2.5, 1.5] with ``f != 1.5``: the configurations allowed are 0.5 and 2.5, written as
    the space's indices (0 and 1), never the floats cast to integers."""
    from launchtune.kernels.kernel.spec import load_kernel_spec

    written(tune_params={"block_size_x": [32], "f": [0.5, 2.5, 1.5]}, restrictions=lambda p: p["f"] != 1.5)
    (inputs,) = (tmp_path / "out" / "inputs").iterdir()
    spec = load_kernel_spec(inputs / "kernel.yaml")
    space = spec.space((N, 1, 1))
    tuned = sorted(spec.actual(c)["f"] for c in space.grid() if space.is_valid(c))
    assert tuned == [0.5, 2.5]


def test_a_code_generator_runs_here_once_per_configuration(written, tmp_path):
    """Kernel Tuner's code generator: each configuration compiles the text the generator gave it, through
    one source of ``#if`` branches on the parameters' ``#define``s."""
    calls = []

    def generator(p):
        calls.append(dict(p))
        return SOURCE.replace("scale(", f"scale( /* {p['block_size_x']} */")

    kernel, _ = written(kernel_source=generator, restrictions=["tile == 1"])
    assert calls == [{"block_size_x": 32, "tile": 1}, {"block_size_x": 64, "tile": 1}]
    (inputs,) = (tmp_path / "out" / "inputs").iterdir()
    code = (inputs / "kernel.cu").read_text()
    assert code.startswith("#if (block_size_x == 32 && tile == 1)\n") and code.endswith("#endif\n")
    assert "#elif (block_size_x == 64 && tile == 1)\n" in code and code.count("/* 64 */") == 1


@pytest.mark.parametrize("name", ["tune_kernel", "run_kernel"])
def test_kernel_tuners_signature_in_its_order(name):
    """Every parameter of Kernel Tuner 1.5's function, in its order (a positional call means the same);
    launchtune's own come after, keyword-only."""
    import inspect

    kernel_tuner = pytest.importorskip("kernel_tuner")
    theirs = list(inspect.signature(getattr(kernel_tuner, name)).parameters)
    ours = inspect.signature(getattr(launchtune, name)).parameters
    assert list(ours)[: len(theirs)] == theirs
    assert all(p.kind == p.KEYWORD_ONLY for p in list(ours.values())[len(theirs) :])


def test_a_cache_resumes_what_it_holds_is_not_measured_again(written, tmp_path):
    """Kernel Tuner's ``cache``: configurations it holds are not measured again (the baseline is, since
    every pick is re-measured against it); the results are the cache's and the new ones, merged into it."""
    import types

    import pandas as pd

    cache = tmp_path / "kt.json"
    held = {
        "32,1": {"block_size_x": 32, "tile": 1, "time": 3.0},
        "64,1": {"block_size_x": 64, "tile": 1, "time": 2.0},
    }
    cache.write_text(json.dumps({"tune_params_keys": ["block_size_x", "tile"], "cache": held}))
    written(cache=cache)
    (inputs,) = (tmp_path / "out" / "inputs").iterdir()
    assert np.load(inputs / "allowed.npy").tolist() == [[32, 1], [32, 2], [64, 2]]  # (32, 1): the baseline

    rows = pd.DataFrame({"block_size_x": [32, 32, 64], "tile": [1, 2, 2], "status": ["ok", "ok", "invalid"],
                         "total_ms": [2.5, 1.5, float("nan")], "gpu_class": "h100"})  # fmt: skip
    params = {"block_size_x": [32, 64], "tile": [1, 2]}
    results, env = PAIR(
        types.SimpleNamespace(rows=rows), params, {}, {}, [N], 7, "time", False, cache, "scale", True,
        list(held.values()),
    )  # fmt: skip
    assert [(r["block_size_x"], r["tile"], r["time"]) for r in results] == [
        (64, 1, 2.0), (32, 1, 2.5), (32, 2, 1.5), (64, 2, "InvalidConfig")
    ]  # fmt: skip
    assert env["best_config"]["tile"] == 2 and len(json.loads(cache.read_text())["cache"]) == 4


def test_nvml_energy_and_power_observers_are_ours_in_kernel_tuners_units():
    import types

    import pandas as pd

    rows = pd.DataFrame({"block_size_x": [32], "status": ["ok"], "total_ms": [2.0], "energy_mJ": [5.0],
                         "power_W": [250.0], "gpu_class": "h100"})  # fmt: skip
    observed = {k: api.NVML_OBSERVABLES[k] for k in ("nvml_energy", "nvml_power")}
    results, _ = PAIR(types.SimpleNamespace(rows=rows), {"block_size_x": [32]}, {}, observed, [N], 7, "time",
                      False, None, "scale", True)  # fmt: skip
    assert results[0]["nvml_energy"] == 0.005 and results[0]["nvml_power"] == 250.0


def test_results_are_what_kernel_tuners_own_tools_read(tmp_path):
    """Kernel Tuner's ``store_output_file`` (vector_add.py calls it on the results) takes ours: its timing
    keys are there, and a failed configuration's error is its own class."""
    import types

    import pandas as pd

    file_utils = pytest.importorskip("kernel_tuner.file_utils")
    rows = pd.DataFrame({"block_size_x": [32, 64], "status": ["ok", "invalid"],
                         "total_ms": [2.0, float("nan")], "compile_ms": [150.0, None], "repeats": [7, 7],
                         "gpu_class": "h100"})  # fmt: skip
    results, _ = PAIR(types.SimpleNamespace(rows=rows), {"block_size_x": [32, 64]}, {}, {}, [N], 7, "time",
                      False, None, "scale", True)  # fmt: skip
    file_utils.store_output_file(str(tmp_path / "out.json"), results, {"block_size_x": [32, 64]})
    stored = json.loads((tmp_path / "out.json").read_text())["results"]
    assert [r["invalidity"] for r in stored] == ["correct", "constraints"]
    assert stored[0]["times"]["compilation"] == 150.0 and stored[0]["times"]["benchmark"] == 14.0


def test_a_metric_named_like_gb_per_s_is_evaluated_here(written, tmp_path):
    """vector_add_metric.py's ``metrics["GB/s"] = "... / (time/1000)"``: a name the kernel spec cannot hold,
    so the string is evaluated on each result here; identifiers go to the spec as before."""
    import types

    import pandas as pd

    kernel, _ = written(metrics={"GB/s": "8 / (time / 1000)", "gb_s": "8 / (time / 1000)"})
    assert list(kernel["metrics"]) == ["gb_s"]
    rows = pd.DataFrame({"block_size_x": [32], "status": ["ok"], "total_ms": [2.0], "gpu_class": "h100"})
    functions = {"GB/s": api._metric_here("GB/s", "8 / (time / 1000)", ["block_size_x", "time"])}
    results, _ = PAIR(types.SimpleNamespace(rows=rows), {"block_size_x": [32]}, {}, functions, [N], 7, "time",
                      False, None, "scale", True)  # fmt: skip
    assert results[0]["GB/s"] == 4000.0


def test_the_launch_grid_is_kernel_tuners():
    """``grid_div_*`` and ``problem_size`` in each of Kernel Tuner's forms (None, names, expressions,
    numbers, ``[]``, functions of the configuration) give Kernel Tuner's own grid."""
    from launchtune import kernel_tuner_compat as kt

    util = pytest.importorskip("kernel_tuner.util")
    config = {"block_size_x": 32, "tile": 3, "block_size_y": 4}
    names = ["block_size_x", "block_size_y", "block_size_z"]
    cases = [
        (1000, (None, None, None)),
        ((1000, 70), (["block_size_x", "tile"], lambda p: p["block_size_y"] * 2, None)),
        ("tile * 100", ([], None, None)),
        (lambda p: (p["tile"] * 10, 7), (lambda p: 4, "block_size_y", 1)),
    ]
    for size, divisors in cases:
        expected = util.get_grid_dimensions(util.get_problem_size(size, config), config, divisors, names)
        assert kt.launch_grid(size, divisors, names)(config) == tuple(expected)
    with pytest.raises(ValueError, match=r"^grid_div_x: ZeroDivisionError"):
        kt.launch_grid(1000, (lambda p: 1 // 0, None, None), names)(config)
