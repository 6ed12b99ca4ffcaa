"""The kernel workload's checks before any cluster starts, its registration and its refusal to run without a
GPU; the tuned pick for a device from a tuning table."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from launchtune.kernels.kernel import pick_for_device
from launchtune.kernels.kernel.errors import SpecError
from launchtune.kernels.kernel.options import largest_memory_bytes
from launchtune.kernels.kernel.pick import current_gpu_class
from launchtune.kernels.kernel.workload import KernelWorkload
from launchtune.kernels.workload import WorkloadError
from launchtune.pipeline.store.workloads import make_workload, workload_class, workload_code
from tests.conftest import REPO

CONVOLUTION = REPO / "kernels" / "examples" / "convolution.yaml"


def test_registered_and_checked_through_the_workload_interface(write_spec):
    assert workload_class("kernel") is KernelWorkload and KernelWorkload.capabilities.gpu_only
    KernelWorkload.check_arguments("demo", "1000", spec=str(write_spec()), seed=3, compile_workers=0)
    KernelWorkload.check_arguments("convolution", "4096x4096", spec=str(CONVOLUTION))


@pytest.mark.parametrize(
    ("options", "field", "why"),
    [
        ({}, "options.spec", "needs options.spec"),
        ({"spec": "x.yaml", "colour": 1}, "options", "unknown option 'colour'"),
        ({"seed": -1}, "options.seed", "integer >= 0"),
        ({"compile_workers": "many"}, "options.compile_workers", "'auto' or a number"),
    ],
)
def test_bad_options_name_their_field(write_spec, options, field, why):
    options = {"spec": str(write_spec()), **options} if "spec" not in options and options else options
    with pytest.raises(WorkloadError) as info:
        KernelWorkload.check_arguments("demo", "1000", **options)
    assert info.value.field == field and why in str(info.value)


def test_arrays_larger_than_any_gpu_are_refused_at_the_check(write_spec):
    path = write_spec()
    KernelWorkload.check_arguments("demo", "1000000000", spec=str(path))  # 8 GB fit a known GPU
    size = int(largest_memory_bytes() / 8) + 1_000_000  # two float32 arrays: just over the largest GPU
    with pytest.raises(
        SpecError, match=r"arguments: the arrays take [\d.,]+ GB, more than any GPU class of the"
    ):
        KernelWorkload.check_arguments("demo", str(size), spec=str(path))


def test_the_numpy_backend_is_refused_in_one_line(write_spec):
    with pytest.raises(WorkloadError, match="compiles and runs CUDA, and the backend is numpy") as info:
        make_workload("kernel", "demo", "1000", "numpy", spec=str(write_spec()))
    assert info.value.field == "backend"


def test_code_the_spec_names_is_listed_for_the_sweep_to_allow(write_spec):
    path = write_spec(reference="mypkg.check:answer")
    kernel = SimpleNamespace(workload="kernel", options={"spec": str(path)})
    assert workload_code(kernel) == [(f"{path}: reference", "mypkg.check:answer")]
    assert workload_code(SimpleNamespace(workload="cfd", options={"space": "paper"})) == []


def _table(tmp_path):
    entry = {
        "workload": "kernel",
        "case": "demo",
        "size": "1000",
        "source": "sweep",
        "default": {"block_size_x": 32, "tile": 1},
        "default_ms": 0.02,
    }
    doc = {
        "format": "launchtune.tuning_table/1",
        "version": 1,
        "entries": [
            {**entry, "gpu_class": "h100", "best": {"block_size_x": 64, "tile": 2}, "best_ms": 0.01},
            {**entry, "gpu_class": "a100", "best": {"block_size_x": 128, "tile": 1}, "best_ms": 0.015},
        ],
    }
    path = tmp_path / "tuning_table.json"
    path.write_text(json.dumps(doc))
    return path


def test_pick_for_device(tmp_path, write_spec):
    table = _table(tmp_path)
    pick = pick_for_device(table, gpu_class="a100")
    assert pick.tuned and pick.config == {"block_size_x": 128, "tile": 1} and pick.ms == 0.015
    pick = pick_for_device(table, write_spec(), gpu_class="h100")
    assert pick.config == {"block_size_x": 64, "tile": 2}
    assert pick.grid == (8, 1, 1) and pick.block == (64, 1, 1)
    assert pick.defines["tile"] == 2 and pick.defines["grid_size_x"] == 8
    untuned = pick_for_device(table, gpu_class="v100")  # no entry: the default, said so
    assert not untuned.tuned and untuned.config == {"block_size_x": 32, "tile": 1}
    here = pick_for_device(table)  # this process's device (the CPU class where no GPU is visible)
    assert here.gpu_class == current_gpu_class() and here.tuned == (here.gpu_class in ("h100", "a100"))
