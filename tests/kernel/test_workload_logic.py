"""The kernel workload's own logic on a CPU, with CuPy stood in for (``fake_cupy``): what a check and a run
do with compile errors, block limits and wrong answers, constant memory, compiling ahead, and which
configuration gets a compile's time."""

from __future__ import annotations

import numpy as np
import pytest

from launchtune.kernels.kernel import workload as workload_module
from launchtune.kernels.kernel.errors import SpecError
from launchtune.kernels.workload import WorkloadError
from tests.kernel import fake_cupy


@pytest.fixture
def make(monkeypatch, write_spec):
    monkeypatch.setattr(workload_module, "get_backend", lambda name: fake_cupy.fake_backend())
    fake_cupy.COMPILED.clear()

    def build(workers: int = 0, **changes):
        changes.setdefault("tune_params", {"block_size_x": [32, 64, 1024, 2048], "tile": [1, 2],
                                           "broken": [0, 1], "wrong": [0, 1], "regs": [32, 128]})  # fmt: skip
        changes.setdefault("restrictions", None)
        return workload_module.make_workload("scale", None, "cupy", spec=str(write_spec(**changes)),
                                             compile_workers=workers)  # fmt: skip

    return build


BASE = {"block_size_x": 32, "tile": 1, "broken": 0, "wrong": 0, "regs": 32}


def test_check_and_run_on_a_good_configuration(make):
    w = make()
    check = w.check({**BASE, "block_size_x": 64, "tile": 2})
    assert check.ok, check.reason
    out = w._args[0]
    assert np.array_equal(out, 2 * w._host[1])  # the launch covered every element: ceil(1000 / 128) blocks
    timing = w.run({**BASE, "block_size_x": 64, "tile": 2}, 3)
    assert timing.total == 0.25 and timing.kernels == {"scale": 0.25} and timing.repeats == 3
    assert timing.extra["grid"] == [8, 1, 1] and timing.extra["block"] == [64, 1, 1]
    function = w.compiled({**BASE, "block_size_x": 64, "tile": 2}).function
    assert function.launches[-4:] == [((8, 1, 1), (64, 1, 1))] * 4  # a warm-up and three timed launches


def test_invalid_configurations_say_why(make):
    w = make()
    broken = w.check({**BASE, "broken": 1})
    assert (
        not broken.ok
        and broken.reason == 'compile error: kern.cu(3): error: identifier "nonsense" is undefined'
    )
    wrong = w.check({**BASE, "wrong": 1})
    assert not wrong.ok
    assert wrong.reason.startswith("out[")
    assert "(difference 1 over atol 1e-06 + rtol 1e-05); 1000 elements differ" in wrong.reason
    # what no device launches is not in the space (Kernel Tuner's max_threads); what the compiled kernel's
    # registers limit is a row that says why
    assert "over 1024 threads" in " ".join(w.space().violations({**BASE, "block_size_x": 2048}))
    threads = w.check({**BASE, "block_size_x": 1024, "regs": 128})
    assert not threads.ok
    assert threads.reason.startswith(
        "block of 1024 threads over the compiled kernel's limit of 512 (128 registers"
    )
    registers = w.check({**BASE, "block_size_x": 64, "regs": 128})  # 512 threads at most with 128 registers
    assert registers.ok
    with pytest.raises(WorkloadError, match="compile error"):
        w.run({**BASE, "broken": 1}, 2)  # without a check first: a failed row naming the compile error


def test_the_reference_is_the_default_configurations_outputs_from_a_fresh_start(make):
    w = make()
    w._args[0][...] = 123.0  # whatever a previous launch left: outputs are reset before each check
    assert w.check({**BASE, "tile": 2}).ok
    assert np.array_equal(w.reference_outputs()[0], 2 * w._host[1])


def test_each_configuration_compiles_once_and_its_row_gets_the_time(make):
    w = make(workers=3)
    configs = [{**BASE, "block_size_x": b, "tile": t} for b in (32, 64) for t in (1, 2)]
    assert w.compile_ahead(configs) == 4  # the default (32, 1) first: the first check compares with it
    assert w.compile_ahead(configs + [{**BASE, "block_size_x": 7}]) == 0  # 7 is not in the space: skipped
    for config in configs:
        assert w.check(config).ok
        assert w.run(config, 1).extra["compile_ms"] >= 0
    compiled = [d for d in fake_cupy.COMPILED if d.get("broken") == 0]
    keys = [(d["block_size_x"], d["tile"]) for d in compiled]
    assert sorted(keys) == [(32, 1), (32, 2), (64, 1), (64, 2)]  # the default is (32, 1): compiled once too
    assert w.take_compile_ms() == 0  # each module's time went to the row that first used it


def test_constant_memory_is_filled_where_a_module_declares_the_symbol(make):
    w = make(
        arguments=[
            {"name": "out", "dtype": "float32", "shape": ["problem_size_x"], "output": True},
            {"name": "in", "dtype": "float32", "shape": ["problem_size_x"], "fill": "arange"},
            {"name": "n", "dtype": "int32", "value": "problem_size_x"},
            {
                "name": "table",
                "dtype": "float32",
                "shape": [4],
                "fill": {"constant": 7},
                "constant": "d_table",
            },
            {"name": "missing", "dtype": "float32", "shape": [2], "constant": "d_absent"},
        ]
    )
    compiled = w.compiled(BASE)
    assert compiled.module.constants["d_table"].tolist() == [7.0] * 4
    assert [a.name for a in w.spec.arguments if a.argument] == ["out", "in", "n"]  # constants not passed
    assert w.check(BASE).ok


def test_describe_names_the_timed_kernel(make):
    info = make(workers=2).describe()
    assert (
        info["kernels"] == ["scale"] and info["compile_workers"] == 2 and info["problem_size"] == [1000, 1, 1]
    )


def test_a_batch_through_the_sweeps_worker(make, tmp_path):
    """The worker's measure_batch with the kernel workload (CuPy stood in for): each row's status, reason and
    compile time in the shard."""
    import pyarrow.parquet as pq

    from launchtune.pipeline.store.spec import parse_spec
    from launchtune.pipeline.sweep import worker

    w = make(workers=2)
    sweep = {
        "name": "k",
        "workload": "kernel",
        "case": "scale",
        "size": "1000",
        "options": {"spec": str(w.spec.path)},
    }
    spec = parse_spec(sweep, str(tmp_path / "sweep.yaml")).to_dict()
    facts = {"backend": "cupy", "gpu_class": "h100", "device_name": "fake", "sm_count": 1,
             "peak_fp64_gflops": 1.0, "spec_bandwidth_gbs": 1.0, "spec_memory_gb": 80.0,
             "measured_bandwidth_gbs": 1.0, "cuda_visible_devices": "0", "pci_bus_id": "0"}  # fmt: skip
    worker._CACHE[worker._workload_key(spec)] = (w, facts)
    configs = [
        {**BASE, "block_size_x": 64},
        {**BASE, "broken": 1},
        {**BASE, "wrong": 1},
        {**BASE, "block_size_x": 1024, "regs": 128},  # over the compiled kernel's 512 threads
        {**BASE, "block_size_x": 64},  # the same configuration again: compiled once
    ]
    rows = [(i, "exhaustive", c) for i, c in enumerate(configs)]
    plan = {"params": w.space().names, "kernels": ["scale"]}
    path = tmp_path / "shards" / "gpu_class=h100" / "shard-00000.parquet"
    try:
        result = worker.measure_batch(spec, plan, "h100", "00000", rows, str(path), str(tmp_path))
    finally:
        worker._CACHE.clear()
    assert (result["ok"], result["invalid"], result["failed"]) == (2, 3, 0)
    shard = pq.read_table(path).to_pandas()
    assert shard["status"].tolist() == ["ok", "invalid", "invalid", "invalid", "ok"]
    assert shard["reason"][1].startswith("compile error:") and shard["reason"][2].startswith("out[")
    assert shard["reason"][3].startswith("block of 1024 threads")
    assert shard["ms.scale"].tolist()[0] == 0.25 and shard["total_ms"].tolist()[4] == 0.25
    assert shard["compile_ms"].notna().all() and shard["compile_ms"][4] == 0.0
    twice = {**BASE, "block_size_x": 64}
    assert sum(all(d.get(k) == v for k, v in twice.items()) for d in fake_cupy.COMPILED) == 1


def test_a_grid_divisor_of_zero_for_one_configuration_is_an_invalid_row(make):
    w = make(grid_div_x="64 // (block_size_x * tile)")  # 2 for the default (32 x 1), 0 for 64 x 2
    assert w.check({**BASE, "tile": 2}).ok  # 64 // 64 = 1: a grid of 1,000 blocks covers every element
    zero = w.check({**BASE, "block_size_x": 64, "tile": 2})
    assert not zero.ok and "grid_div_x: divisor 0 for this configuration (must be >= 1)" in zero.reason


def test_an_answer_file_is_what_every_configuration_must_compute(make, write_spec, tmp_path):
    """Kernel Tuner's ``answer``: the check compares with the file, not with the default configuration."""
    inputs = np.random.default_rng(1).uniform(-1, 1, 1000).astype(np.float32)
    np.save(tmp_path / "in.npy", inputs)
    np.save(tmp_path / "answer.npy", 2 * inputs)
    arguments = [
        {"name": "out", "dtype": "float32", "shape": ["problem_size_x"], "answer": "answer.npy"},
        {"name": "in", "dtype": "float32", "shape": "problem_size_x", "fill": {"npy": "in.npy"}},
        {"name": "n", "dtype": "int32", "value": "problem_size_x"},
    ]
    w = make(arguments=arguments, default={"wrong": 1})  # the default is wrong: the answer still decides
    assert w.spec.arguments[0].output and w.spec.arguments[0].answer == tmp_path / "answer.npy"
    assert w.check(BASE).ok
    bad = w.check({**BASE, "wrong": 1})
    assert not bad.ok and bad.reason.startswith("out[") and "1000 elements differ" in bad.reason
    np.save(tmp_path / "answer.npy", np.zeros(999, np.float32))
    with pytest.raises(
        SpecError, match=r"arguments\[0\]\.answer: answer\.npy holds float32\[999\], the argument"
    ):
        make(arguments=arguments).check(BASE)


def test_a_list_of_allowed_configurations_is_a_constraint(make, tmp_path):
    """A caller's own restriction (a Python function) reaches the spec as the configurations it allowed."""
    names = ["block_size_x", "tile", "broken", "wrong", "regs"]
    rows = np.array([[32, 1, 0, 0, 32], [64, 2, 0, 0, 32]], np.int64)
    np.save(tmp_path / "allowed.npy", rows)
    space = make(allowed="allowed.npy").space()
    assert space.names == names
    assert [dict(zip(names, r, strict=True)) for r in rows.tolist()] == list(space.grid())
    np.save(tmp_path / "allowed.npy", rows[:, :2])
    with pytest.raises(
        SpecError, match=r"allowed: allowed\.npy holds int64\[2, 2\]; expected integer rows of 5"
    ):
        make(allowed="allowed.npy")
