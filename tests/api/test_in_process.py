"""``launchtune.tune_kernel`` where one local device measures in the caller's process (here the CPU's one
worker, the kernel workload standing on the fake CuPy of ``tests.api.stand_in``): no Dask cluster is made,
and what cannot travel to a worker does work: ``verify=`` runs on each configuration's outputs, Kernel
Tuner's cache is appended as each configuration is measured (and resumed from), and a device array is used
in place."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

import launchtune
from launchtune import api
from tests.api.stand_in import fake_ms
from tests.kernel.conftest import SOURCE

N = 1000
TUNE = {"block_size_x": [32, 64], "tile": [1, 2], "wrong": [0, 1]}
CONFIGS = {(b, t, w) for b in (32, 64) for t in (1, 2) for w in (0, 1)}


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setattr(api, "KERNEL_WORKLOAD", "tests.api.stand_in:make")


@pytest.fixture
def no_dask(monkeypatch):
    """Any Dask client or cluster made meanwhile fails the test."""
    distributed = pytest.importorskip("distributed")
    made: list[str] = []

    def refuse(name):
        def init(self, *a, **k):
            made.append(name)
            raise AssertionError(f"a Dask {name} was made")

        return init

    monkeypatch.setattr(distributed.Client, "__init__", refuse("Client"))
    monkeypatch.setattr(distributed.deploy.spec.SpecCluster, "__init__", refuse("SpecCluster"))
    monkeypatch.setattr(distributed.Scheduler, "__init__", refuse("Scheduler"))
    return made


def _data():
    return np.random.default_rng(7).uniform(-1, 1, N).astype(np.float32)


def _tune(tmp_path, arguments, problem_size=N, **change):
    call = dict(grid_div_x=["block_size_x", "tile"], out=tmp_path / "out", quiet=True)
    return launchtune.tune_kernel("scale", SOURCE, problem_size, arguments, TUNE, **{**call, **change})


def _key(r):
    return (r["block_size_x"], r["tile"], r["wrong"])


def test_one_local_device_and_simulation_mode_start_no_dask_cluster(tmp_path, stand_in, no_dask):
    data = _data()
    results, env = _tune(tmp_path, [np.zeros(N, np.float32), data, np.int32(N)],
                         answer=[2 * data, None, None], cache=tmp_path / "kt.json")  # fmt: skip
    assert {_key(r) for r in results} == CONFIGS
    assert env["best_config"]["time"] == pytest.approx(1.0)
    replayed, _ = launchtune.tune_kernel(
        "scale", SOURCE, N, [np.zeros(N, np.float32), data, np.int32(N)], TUNE,
        cache=tmp_path / "kt.json", simulation_mode=True, quiet=True,
    )  # fmt: skip
    assert {_key(r) for r in replayed} == CONFIGS
    assert no_dask == []


def test_verify_runs_here_on_each_configurations_outputs(tmp_path, stand_in, no_dask):
    """Kernel Tuner's reduction example's shape: ``answer`` holds a sum, not an array of the output's shape,
    and ``verify`` compares it with the sum of the output; the wrong configurations are invalid."""
    data = _data()
    seen = []

    def verify(answer, result_host, atol=None):
        seen.append((answer, result_host, atol))
        return bool(np.isclose(answer[0], np.sum(result_host[0]), atol=atol))

    results, _ = _tune(tmp_path, [np.zeros(N, np.float32), data, np.int32(N)],
                       answer=[np.sum(2 * data), None, None], verify=verify, atol=1e-3)  # fmt: skip
    assert {_key(r) for r in results if isinstance(r["time"], float)} == {c for c in CONFIGS if c[2] == 0}
    assert {r["time"] for r in results if r["wrong"] == 1} == {"InvalidConfig"}
    answer, result_host, atol = seen[0]
    # as Kernel Tuner's: the arguments the answer names come back to the host, the others are None
    assert atol == 1e-3 and len(result_host) == 3 and result_host[1:] == [None, None]
    assert isinstance(result_host[0], np.ndarray) and answer[1:] == [None, None]
    assert len(seen) >= len(CONFIGS)  # every configuration's check, in this process
    # the output is reset before each check's launch: a wrong configuration's +1 does not leak into the next
    (inputs,) = (tmp_path / "out" / "inputs").iterdir()
    spec = yaml.safe_load((inputs / "kernel.yaml").read_text())
    assert [a.get("output") for a in spec["arguments"]] == [True, False, None]
    assert "def verify" in (inputs / "verify.py").read_text()


def test_verify_on_a_cluster_is_one_line(tmp_path, stand_in):
    with pytest.raises(ValueError, match=r"^verify=: a Python function runs only where one local GPU"):
        _tune(tmp_path, [np.zeros(N, np.float32), _data(), np.int32(N)], cluster="slurm",
              verify=lambda a, r, atol=None: True)  # fmt: skip
    assert not (tmp_path / "out").exists()


def test_the_cache_is_appended_as_each_configuration_is_measured(tmp_path, stand_in):
    """Read by Kernel Tuner's own reader while the sweep runs (open, as Kernel Tuner leaves it) and after
    (closed); a second call with the same cache measures only the baseline again."""
    kt_util = pytest.importorskip("kernel_tuner.util")
    path = tmp_path / "kt.json"
    held: list[int] = []
    measured: list[tuple] = []
    returned: set[tuple] = set()

    def verify(answer, result_host, atol=None):  # called before each configuration is timed
        returned.add(tuple(r is None for r in result_host))  # no answer: every array, no scalar
        held.append(len(kt_util.read_cache(str(path), open_cache=False)["cache"]) if path.exists() else 0)
        return True

    def metric(p):  # a Python metric: run here on each result, the appended entries too
        measured.append(_key(p))
        return 1 / p["time"]

    data = _data()
    args = [np.zeros(N, np.float32), data, np.int32(N)]
    _tune(tmp_path, args, verify=verify, cache=path, metrics={"per_ms": metric})
    assert held == sorted(held) and held[0] == 0 and held[-1] >= len(CONFIGS) - 1
    assert returned == {(False, False, True)}
    cache = kt_util.read_cache(str(path), open_cache=False)
    assert path.read_text().endswith("}\n}")  # closed after the sweep, in Kernel Tuner's layout
    assert {tuple(e[n] for n in TUNE) for e in cache["cache"].values()} == CONFIGS
    entry = cache["cache"]["64,2,0"]
    assert (
        entry["time"] == pytest.approx(fake_ms({"block_size_x": 64, "tile": 2})) and len(entry["times"]) == 7
    )
    assert entry["per_ms"] == pytest.approx(1 / entry["time"])

    held.clear()
    results, _ = _tune(tmp_path, args, verify=verify, cache=path, out=tmp_path / "again")
    assert len(held) >= 1 and {_key(r) for r in results} == CONFIGS
    again = launchtune.load(tmp_path / "again").rows
    assert [tuple(r) for r in again[list(TUNE)].to_numpy().tolist()] == [(32, 1, 0)]  # the baseline only


class DeviceArray(np.ndarray):
    """A device array as ``tune_kernel`` tells one (CuPy's two marks); copying it to the host fails."""

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3}

    def get(self):
        raise AssertionError("copied through the host")


def test_a_device_array_is_used_in_place(tmp_path, stand_in, no_dask):
    data = _data()
    out = np.zeros(N, np.float32).view(DeviceArray)
    inp = data.view(DeviceArray)
    results, env = _tune(tmp_path, [out, inp, np.int32(N)], answer=[2 * data, None, None])
    assert {_key(r) for r in results} == CONFIGS
    assert {_key(r) for r in results if isinstance(r["time"], float)} == {c for c in CONFIGS if c[2] == 0}
    (inputs,) = (tmp_path / "out" / "inputs").iterdir()
    assert not list(inputs.glob("arg*.npy"))  # nothing of them written
    spec = yaml.safe_load((inputs / "kernel.yaml").read_text())
    assert [list(a["fill"]) for a in spec["arguments"][:2]] == [["caller"], ["caller"]]
    # the kernel wrote into the caller's array (its last launch's output: a right or a wrong configuration's)
    assert any(np.allclose(np.asarray(out), 2 * data + wrong) for wrong in (0, 1))
    # other contents are another fingerprint, so another folder of inputs
    again = (data + 1).view(DeviceArray)
    assert api._fingerprint(again) != api._fingerprint(inp) == api._fingerprint(data.copy().view(DeviceArray))
    assert json.loads(json.dumps(env))["best_config"]["wrong"] == 0


def test_host_arrays_go_to_the_device_once_and_nothing_is_written_for_them(tmp_path, stand_in, no_dask):
    """One local device: numpy arguments are copied to it once per call, as Kernel Tuner copies them, and
    used in place: no ``.npy`` of them is written, hashed and read back (3.2 GB a call in Kernel Tuner's
    ``reduction``). The caller's arrays are left as they were; other contents are another folder."""
    data = _data()
    out = np.zeros(N, np.float32)
    results, _ = _tune(tmp_path, [out, data, np.int32(N)], answer=[2 * data, None, None])
    assert {_key(r) for r in results if isinstance(r["time"], float)} == {c for c in CONFIGS if c[2] == 0}
    (inputs,) = (tmp_path / "out" / "inputs").iterdir()
    assert not list(inputs.glob("arg*.npy"))
    spec = yaml.safe_load((inputs / "kernel.yaml").read_text())
    assert [list(a["fill"]) for a in spec["arguments"][:2]] == [["caller"], ["caller"]]
    assert not out.any()  # launched on the device's copy
    _tune(tmp_path, [out, data + 1, np.int32(N)], out=tmp_path / "other")
    assert [p.name for p in (tmp_path / "other" / "inputs").iterdir()] != [inputs.name]


def test_the_device_is_described_once_per_process(tmp_path, stand_in, monkeypatch):
    """Repeated calls in one script: the device's facts and its copy bandwidth are read once, not per call."""
    from launchtune.pipeline.sweep import worker

    described = []
    real = worker.describe_device
    monkeypatch.setattr(worker, "_FACTS", {})
    monkeypatch.setattr(worker, "describe_device", lambda backend: described.append(1) or real(backend))
    data = _data()
    for n in (N, N - 1):
        _tune(tmp_path, [np.zeros(N, np.float32), data, np.int32(n)], out=tmp_path / f"out{n}")
    assert described == [1]


def test_grid_divisors_and_problem_size_as_functions_run_here_per_configuration(tmp_path, stand_in, no_dask):
    """Kernel Tuner's ``grid_div_x`` and ``problem_size`` as functions of the configuration, run in this
    process for each launch: the stand-in's kernel covers ``grid * block * tile`` elements, so a divisor
    twice too large leaves half the output unwritten (every configuration invalid), the right one none;
    the simulation_mode replay of the cache takes them too."""
    data = _data()
    seen: list[dict] = []

    def divisor(p):
        seen.append(dict(p))
        return p["block_size_x"] * p["tile"]

    args = [np.zeros(N, np.float32), data, np.int32(N)]
    cache = tmp_path / "kt.json"
    results, _ = _tune(tmp_path, args, grid_div_x=divisor, problem_size=lambda p: (N,),
                       answer=[2 * data, None, None], cache=cache)  # fmt: skip
    assert {_key(r) for r in results if isinstance(r["time"], float)} == {c for c in CONFIGS if c[2] == 0}
    assert {(c["block_size_x"], c["tile"], c["wrong"]) for c in seen} == CONFIGS
    rows = launchtune.load(tmp_path / "out").rows
    ok = rows[rows["status"] == "ok"]
    assert sorted(map(tuple, ok[["block_size_x", "tile"]].to_numpy().tolist())) == [
        (32, 1),
        (32, 2),
        (64, 1),
        (64, 2),
    ]
    (inputs,) = (tmp_path / "out" / "inputs").iterdir()
    assert "def divisor" in (inputs / "grid_div_x.py").read_text()
    halved, _ = _tune(tmp_path, args, grid_div_x=lambda p: 2 * divisor(p), answer=[2 * data, None, None],
                      out=tmp_path / "halved")  # fmt: skip
    assert {r["time"] for r in halved} == {"InvalidConfig"}
    replayed, _ = _tune(tmp_path, args, grid_div_x=divisor, problem_size=lambda p: N, cache=cache,
                        simulation_mode=True, out=None)  # fmt: skip
    assert {_key(r) for r in replayed} == CONFIGS


def test_a_finished_calls_workload_and_its_arrays_are_released(tmp_path, stand_in, monkeypatch):
    """Repeated calls in one script: the workload a call built (and the device copies of its arrays) goes
    when the call ends, its compile pool's threads with it; those threads held it, so each of Kernel Tuner's
    ``reduction`` calls kept its 3.2 GB on the GPU."""
    import gc
    import threading
    import weakref

    from launchtune.pipeline.sweep import worker

    built = []
    real = worker.build_workload

    def build(spec):
        workload = real(spec)
        built.append(weakref.ref(workload))
        return workload

    monkeypatch.setattr(worker, "build_workload", build)
    before = set(threading.enumerate())
    _tune(tmp_path, [np.zeros(N, np.float32), _data(), np.int32(N)])
    for thread in set(threading.enumerate()) - before:
        if thread.name.startswith("compile"):  # the workload's compile pool (kernels.kernel.compile)
            thread.join(timeout=60)
            assert not thread.is_alive()
    gc.collect()
    assert built and built[0]() is None


def test_a_define_as_a_function_runs_here_per_configuration(tmp_path, stand_in, no_dask):
    """Kernel Tuner's ``defines`` value as a function of the configuration: each configuration compiles
    with its value (here ``wrong``: the stand-in's kernel then adds 1, so those configurations are
    invalid); on a cluster, one line."""
    data = _data()
    called = []

    def wrong(p):
        called.append(dict(p))
        return np.int64(p["block_size_x"] == 32)

    tune = {"block_size_x": [32, 64], "tile": [1, 2]}
    results, _ = launchtune.tune_kernel(
        "scale", SOURCE, N, [np.zeros(N, np.float32), data, np.int32(N)], tune,
        grid_div_x=["block_size_x", "tile"], answer=[2 * data, None, None], defines={"wrong": wrong},
        out=tmp_path / "out", quiet=True,
    )  # fmt: skip
    ok = {(r["block_size_x"], r["tile"]) for r in results if isinstance(r["time"], float)}
    assert ok == {(64, 1), (64, 2)}
    assert {(c["block_size_x"], c["tile"]) for c in called} == {(b, t) for b in (32, 64) for t in (1, 2)}
    (inputs,) = (tmp_path / "out" / "inputs").iterdir()
    assert "def wrong" in (inputs / "define_wrong.py").read_text()
    with pytest.raises(ValueError, match=r"^defines=: 'wrong': a function runs only where one local GPU"):
        launchtune.tune_kernel("scale", SOURCE, N, [np.zeros(N, np.float32), data, np.int32(N)], tune,
                               defines={"wrong": wrong}, cluster="slurm", out=tmp_path / "other")  # fmt: skip
    assert not (tmp_path / "other").exists()


def test_a_device_arrays_spec_elsewhere_is_one_line(tmp_path, stand_in):
    """The kernel spec of a call that used a device array in place, read in another process (a rerun
    from the command line, a worker): one line naming the argument, not zeros in its place."""
    from launchtune.kernels.kernel.errors import SpecError
    from tests.api.stand_in import make

    data = _data()
    _tune(tmp_path, [np.zeros(N, np.float32).view(DeviceArray), data.view(DeviceArray), np.int32(N)])
    (inputs,) = (tmp_path / "out" / "inputs").iterdir()
    with pytest.raises(SpecError, match=r"arguments\[0\]\.fill: a device array given to tune_kernel"):
        make("scale", None, spec=str(inputs / "kernel.yaml"))


def test_the_next_configurations_compile_ahead_of_the_batch_measured(tmp_path, stand_in, monkeypatch):
    """One device in this process: before each batch is measured, the configurations after it (up to
    ``COMPILE_AHEAD``) are queued on the compile pool, each once, in measuring order, so the GPU never waits
    for a batch's first compile."""
    from launchtune.pipeline.sweep import measure

    queued: list[list[tuple[int, int, int]]] = []
    real = measure.compile_task

    def recording(spec, configs):
        queued.append([_key(c) for c in configs])
        return real(spec, configs)

    monkeypatch.setattr(measure, "compile_task", recording)
    monkeypatch.setattr(measure, "COMPILE_AHEAD", 3)
    data = _data()
    results, _ = _tune(tmp_path, [np.zeros(N, np.float32), data, np.int32(N)], answer=[2 * data, None, None])
    flat = [k for call in queued for k in call]
    assert sorted(flat) == sorted(_key(r) for r in results) and len(set(flat)) == len(flat) == len(CONFIGS)
    batch = json.loads((tmp_path / "out" / "sweep.json").read_text())["spec"]["batch_size"]
    assert len(queued[0]) == min(len(CONFIGS), batch + 3)  # the first batch and the three after it


def test_blocks_no_device_launches_are_not_measured(tmp_path, stand_in):
    """tune_kernel's space leaves out a thread block over 1024 threads (Kernel Tuner's max_threads), so it
    is neither measured nor counted against ``max_fevals``."""
    data = _data()
    tune = {"block_size_x": [32, 64, 2048], "tile": [1, 2], "wrong": [0]}
    arguments = [np.zeros(N, np.float32), data, np.int32(N)]
    call = dict(grid_div_x=["block_size_x", "tile"], quiet=True)
    results, _ = launchtune.tune_kernel("scale", SOURCE, N, arguments, tune, out=tmp_path / "all", **call)
    assert sorted(_key(r) for r in results) == [(32, 1, 0), (32, 2, 0), (64, 1, 0), (64, 2, 0)]
    sampled, _ = launchtune.tune_kernel("scale", SOURCE, N, arguments, tune, out=tmp_path / "sampled",
                                        strategy_options={"max_fevals": 4}, **call)  # fmt: skip
    assert sorted(_key(r) for r in sampled) == [(32, 1, 0), (32, 2, 0), (64, 1, 0), (64, 2, 0)]
