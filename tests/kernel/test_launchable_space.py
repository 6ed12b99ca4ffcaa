"""The space holds only configurations whose thread block CUDA launches (1024 threads, 1024 x 1024 x 64), as
Kernel Tuner's Searchspace leaves out a block over the device's max_threads: a sample or a search's budget
draws only launchable configurations, and the count is Kernel Tuner's for the same tune_params."""

from __future__ import annotations

import pytest

from launchtune.kernels.kernel.errors import SpecError
from launchtune.kernels.kernel.spec import check_for_problem, load_kernel_spec

# Kernel Tuner's examples/cuda/stencil.py and the first call of sepconv.py (tests/kernel_tuner_examples/)
STENCIL = {"block_size_x": [32 * i for i in range(1, 9)], "block_size_y": [2**i for i in range(6)]}
SEPCONV_ROW = {
    "filter_height": [1],
    "filter_width": list(range(3, 19, 2)),
    "block_size_x": [16 * i for i in range(1, 65)],
    "block_size_y": [2**i for i in range(6)],
    "tile_size_x": list(range(1, 11)),
    "tile_size_y": [1],
    "use_padding": [0, 1],
    "read_only": [0, 1],
}
SEPCONV_RESTRICT = ["use_padding==0 or (block_size_x % 32 != 0)", "block_size_x*block_size_y >= 32"]


def kernel_tuner_rows(tune_params: dict, restrictions: list[str]) -> set[tuple[int, ...]]:
    from kernel_tuner.searchspace import Searchspace

    space = Searchspace(dict(tune_params), list(restrictions), 1024)
    assert space.size == len(space.list)
    return {tuple(int(v) for v in row) for row in space.list}


def ours(write_spec, tune_params: dict, restrictions: list[str] | None, **changes):
    changes.setdefault("grid_div_x", ["block_size_x"] if "block_size_x" in tune_params else None)
    spec = load_kernel_spec(write_spec(tune_params=tune_params, restrictions=restrictions, **changes))
    return spec, spec.space(spec.problem(None))


@pytest.mark.parametrize(
    ("tune_params", "restrictions", "count", "default"),
    [(STENCIL, [], 31, None), (SEPCONV_ROW, SEPCONV_RESTRICT, None, {"block_size_x": 32})],
    ids=["stencil", "sepconv"],
)
def test_space_is_kernel_tuners_searchspace(write_spec, tune_params, restrictions, count, default):
    spec, space = ours(write_spec, tune_params, restrictions or None, default=default)
    rows = {tuple(int(v) for v in row) for row in space.rows()}
    expected = kernel_tuner_rows(tune_params, restrictions)
    assert rows == expected
    assert len(space.rows()) == len(expected)
    if count is not None:
        assert len(expected) == count  # the 31 Kernel Tuner measured for stencil on an H200
    # a configuration over 1024 threads is not a member, with the reason named
    assert not space.is_valid({**space.default, "block_size_x": 256, "block_size_y": 8})
    assert any("1024 threads" in why for why in space.violations({**space.default, "block_size_x": 256,
                                                                   "block_size_y": 8}))  # fmt: skip
    # the per-configuration answer is the array answer, and a sample draws only launchable blocks
    assert all(space.is_valid(c) for c in list(space.grid())[:200])
    for config in space.sample(40, seed=0):
        block = spec.block(config)
        assert block[0] * block[1] * block[2] <= 1024


def test_block_size_names_and_untuned_dimensions(write_spec):
    # the names in block_size_names are the block; x untuned is Kernel Tuner's 256 threads
    params = {"tile": [1, 2], "ty": [1, 2, 4, 8]}
    spec, space = ours(
        write_spec, params, None, block_size_names=["bx", "ty"], grid_div_x=["tile"], grid_div_y=["ty"]
    )
    assert spec.block({"tile": 1, "ty": 4}) == (256, 4, 1)
    assert sorted(c["ty"] for c in space.grid()) == [1, 1, 2, 2, 4, 4]  # 256 x 8 > 1024 left out
    # a z dimension over CUDA's 64 is left out although the product fits
    params = {"block_size_x": [1], "block_size_y": [1], "block_size_z": [32, 64, 128]}
    spec, space = ours(write_spec, params, None)
    assert [c["block_size_z"] for c in space.grid()] == [32, 64]


def test_default_over_the_limit_is_one_line(write_spec):
    spec = load_kernel_spec(
        write_spec(tune_params={"block_size_x": [2048, 32], "tile": [1]}, restrictions=None)
    )
    with pytest.raises(SpecError, match=r"default configuration .* breaks the thread block"):
        check_for_problem(spec, spec.problem(None), None)
