"""The kernel workload's own logic on a CPU, with CuPy stood in for (``fake_cupy``): what a check and a run
do with compile errors, block limits and wrong answers, constant memory, compiling ahead, and which
configuration gets a compile's time."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.custom import workload as workload_module
from kernels.workload import WorkloadError
from tests.custom_kernel import fake_cupy


@pytest.fixture
def make(monkeypatch, write_spec):
    monkeypatch.setattr(workload_module, "get_backend", lambda name: fake_cupy.fake_backend())
    fake_cupy.COMPILED.clear()

    def build(workers: int = 0, **changes):
        changes.setdefault("tune_params", {"block_size_x": [32, 64, 2048], "tile": [1, 2], "broken": [0, 1],
                                           "wrong": [0, 1], "regs": [32, 128]})  # fmt: skip
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
    threads = w.check({**BASE, "block_size_x": 2048})
    assert not threads.ok
    assert threads.reason.startswith(
        "block of 2048 threads over the compiled kernel's limit of 1024 (32 registers"
    )
    assert "block (2048, 1, 1) outside CUDA's limits" in threads.reason
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
