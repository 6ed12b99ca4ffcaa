"""Kernel specs: what a valid one gives (space, grid, defines) and one line naming file and field for each
mistake; the example convolution spec's space is exactly the Benchmark Hub's."""

from __future__ import annotations

import gzip
import json

import pytest

from launchtune.kernels.kernel.errors import SpecError
from launchtune.kernels.kernel.spec import check_for_problem, kernel_defined, load_kernel_spec
from tests.conftest import REPO


def test_valid_spec_gives_space_grid_and_defines(write_spec):
    spec = load_kernel_spec(write_spec())
    problem = spec.problem(None)
    assert problem == (1000, 1, 1)
    space = spec.space(problem)
    configs = list(space.grid())
    assert len(configs) == 8  # 9 pairs, 128 x 4 > 256 excluded
    assert {"block_size_x": 128, "tile": 4} not in configs
    assert space.default == {"block_size_x": 32, "tile": 1}
    # Kernel Tuner's rule: ceil(problem / product of the divisors)
    assert spec.grid({"block_size_x": 64, "tile": 4}, problem) == (4, 1, 1)  # ceil(1000 / 256)
    assert spec.grid({"block_size_x": 32, "tile": 1}, problem) == (32, 1, 1)  # ceil(1000 / 32)
    assert spec.block({"block_size_x": 64, "tile": 2}) == (64, 1, 1)
    defines = spec.defines({"block_size_x": 64, "tile": 2}, problem)
    assert list(defines) == [  # Kernel Tuner's order
        "grid_size_x", "grid_size_y", "grid_size_z", "block_size_x", "block_size_y", "block_size_z", "tile",
        "kernel_tuner",
    ]  # fmt: skip
    assert defines == {
        "grid_size_x": 8, "grid_size_y": 1, "grid_size_z": 1, "block_size_x": 64, "block_size_y": 1,
        "block_size_z": 1, "tile": 2, "kernel_tuner": 1,
    }  # fmt: skip
    assert spec.problem("2000") == (2000, 1, 1)
    assert spec.problem("64x32") == (64, 32, 1)


def test_grid_defaults_follow_kernel_tuner(write_spec):
    # no grid_div: the block size parameter of each dimension divides it (1 where not tuned)
    spec = load_kernel_spec(write_spec(grid_div_x=None))
    assert spec.grid({"block_size_x": 64, "tile": 4}, (1000, 7, 3)) == (16, 7, 3)
    # a dimension whose block size is not tuned gets Kernel Tuner's 256 x 1 x 1
    spec = load_kernel_spec(write_spec(tune_params={"tile": [1, 2]}, restrictions=None, grid_div_x=["tile"]))
    assert spec.block({"tile": 2}) == (256, 1, 1)
    assert spec.grid({"tile": 2}, (1000, 1, 1)) == (500, 1, 1)
    # expressions, and a constant divisor
    spec = load_kernel_spec(write_spec(grid_div_x="block_size_x * tile", grid_div_y=4))
    assert spec.grid({"block_size_x": 32, "tile": 2}, (1000, 10, 1)) == (16, 3, 1)


def test_default_can_be_given(write_spec):
    spec = load_kernel_spec(write_spec(default={"tile": 2}))
    assert spec.space(spec.problem(None)).default == {"block_size_x": 32, "tile": 2}


@pytest.mark.parametrize(
    ("changes", "field", "why"),
    [
        ({"source": "missing.cu"}, "source", "no such file"),
        ({"kernel_name": "other"}, "kernel_name", "no '__global__ ... other('"),
        ({"kernel_name": "sca le"}, "kernel_name", "identifier"),
        ({"tune_params": None}, "", "missing key 'tune_params'"),
        ({"tune_params": {"block_size_x": [32, 1.5]}}, "tune_params.block_size_x", "whole numbers"),
        ({"tune_params": {"block_size_x": [32], "tile": [1, [2]]}}, "tune_params.tile", "numbers or text"),
        ({"tune_params": {"block_size_x": [32, 32]}}, "tune_params.block_size_x", "twice"),
        ({"tune_params": {"grid_size_x": [1]}}, "tune_params", "not a usable parameter name"),
        ({"restrictions": ["block_size_x * tiles <= 256"]}, "restrictions[0]", "unknown name 'tiles'"),
        ({"restrictions": ["len(block_size_x) > 1"]}, "restrictions[0]", "call of 'len'"),
        ({"restrictions": ["__import__('os').system('x')"]}, "restrictions[0]", "is not allowed"),
        ({"restrictions": ["block_size_x.real > 1"]}, "restrictions[0]", "attribute access"),
        ({"grid_div_x": ["block_size_x", 0]}, "grid_div_x[1]", "positive"),
        ({"grid_div_y": 0}, "grid_div_y", "positive"),
        ({"grid_div_x": ["blocksize"]}, "grid_div_x[0]", "unknown name 'blocksize'"),
        (
            {"arguments": [{"name": "o", "dtype": "float32", "shape": ["block_size_x"]}]},
            "arguments[0].shape[0]",
            "unknown name 'block_size_x'",
        ),
        ({"arguments": [{"name": "o", "dtype": "float99", "shape": [4]}]}, "arguments[0].dtype", "float32"),
        (
            {"arguments": [{"name": "o", "dtype": "float32", "shape": [4], "fill": "random"}]},
            "arguments[0].fill",
            "unknown fill",
        ),
        (
            {"arguments": [{"name": "o", "dtype": "float32", "shape": [4], "fill": {"npy": "../x.npy"}}]},
            "arguments[0].fill.npy",
            "outside",
        ),
        (
            {"arguments": [{"name": "o", "dtype": "float32", "shape": [4], "colour": 1}]},
            "arguments[0]",
            "unknown key 'colour'",
        ),
        ({"arguments": None}, "arguments", "give the kernel's arguments"),
        ({"arguments_factory": "os.system"}, "arguments_factory", "module:function"),
        ({"reference": "not a target"}, "reference", "module:function"),
        ({"compiler_options": "--use_fast_math"}, "compiler_options", "list of strings"),
        ({"atol": -1}, "atol", ">= 0"),
        ({"problem_size": [0]}, "problem_size", "positive"),
        ({"default": {"tiles": 1}}, "default", "unknown parameter 'tiles'"),
        ({"colour": 1}, "", "unknown key 'colour'"),
    ],
)
def test_mistakes_are_one_line_naming_file_and_field(write_spec, changes, field, why):
    path = write_spec(**changes)
    with pytest.raises(SpecError) as info:
        load_kernel_spec(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {field}" if field else f"{path}: ")
    assert why in message
    assert "\n" not in message


def test_problem_checks_default_grid_and_memory(write_spec):
    spec = load_kernel_spec(write_spec(default={"block_size_x": 128, "tile": 4}))
    with pytest.raises(SpecError, match="default: the default configuration .* breaks restriction"):
        check_for_problem(spec, spec.problem(None), None)
    spec = load_kernel_spec(write_spec(grid_div_x="block_size_x - 32"))
    with pytest.raises(SpecError, match=r"grid_div_x: divisor 0 .*default configuration"):
        check_for_problem(spec, spec.problem(None), None)
    spec = load_kernel_spec(write_spec())
    check_for_problem(spec, spec.problem(None), 8000.0)  # two arrays of 1000 float32
    with pytest.raises(SpecError, match="arguments: the arrays take .* more than the device's"):
        check_for_problem(spec, spec.problem(None), 7999.0)


def test_aliases_and_huge_files_are_refused(tmp_path, write_spec):
    write_spec()  # the source beside it
    path = tmp_path / "alias.yaml"
    path.write_text("a: &x [1, 2]\nb: *x\n")
    with pytest.raises(SpecError, match="aliases"):
        load_kernel_spec(path)
    path.write_text("x: [" + "1, " * 200_000 + "1]")
    with pytest.raises(SpecError, match="bytes"):
        load_kernel_spec(path)


def test_kernel_name_search():
    assert kernel_defined('extern "C" __global__ void k(float *x) {}', "k")
    assert kernel_defined("__global__ void __launch_bounds__(256) k (float *x) {}", "k")
    assert kernel_defined("template <int n>\n__global__\nvoid k(float *x) {}", "k")
    assert not kernel_defined("__global__ void kk(float *x) {}", "k")
    assert not kernel_defined("__device__ void k(float *x) {}", "k")
    assert not kernel_defined("__global__ void a(float *x) { k(x); }", "k")


def test_convolution_space_is_the_benchmark_hubs(hub_dir):
    """The example's restrictions give exactly the 4,362 configurations the hub brute-forced (the keys of the
    full caches, committed beside the subset), and the subset's caches carry the same header."""
    spec = load_kernel_spec(REPO / "kernels" / "examples" / "convolution.yaml")
    problem = spec.problem(None)
    check_for_problem(spec, problem, None)
    mine = list(spec.space(problem).grid())
    space = json.loads(gzip.decompress((hub_dir / "convolution_space.json.gz").read_bytes()))
    assert len(space["devices"]) == 6 and len(space["configurations"]) == 4362
    names = space["tune_params_keys"]
    assert {",".join(str(c[n]) for n in names) for c in mine} == set(space["configurations"])
    for gpu in ("A100", "MI250X"):
        cache = json.loads(gzip.decompress((hub_dir / "convolution" / f"{gpu}.json.gz").read_bytes()))
        assert cache["tune_params_keys"] == names and set(cache["cache"]) <= set(space["configurations"])
        assert sorted(names) == sorted(spec.names)
        assert {n: list(p.values) for p in spec.params for n in [p.name]} == cache["tune_params"]
        assert cache["problem_size"] == list(spec.problem_size)
        assert cache["kernel_name"] == spec.kernel_name
    assert len(mine) == 4362
