"""The numpy partition method (the reference) on random systems, and the input checks every backend shares."""

from __future__ import annotations

import numpy as np
import pytest

from launchtune.kernels.tridiag import reference
from launchtune.kernels.tridiag.system import (
    TridiagError,
    ZeroPivotError,
    check_streams,
    chunk_bounds,
    parse_size,
    random_system,
    residual,
)
from launchtune.kernels.tridiag.workload import make_workload

# sizes below m, equal to m, not divisible by m or by any stream count, and one large enough to span chunks
SIZES = [1, 2, 3, 7, 10, 11, 97, 1000, 4099, 33_333]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("streams", [1, 2, 4, 8, 16, 32])
def test_residual_random_systems(n, streams):
    rng = np.random.default_rng(n * 100 + streams)
    m = int(rng.choice([3, 4, 10, 13, 32]))
    abcd = random_system(n, seed=int(rng.integers(1 << 30)))
    x = reference.solve(abcd, m=m, streams=streams)
    assert x.shape == (n,)
    assert residual(abcd, x) < 1e-12


def test_matches_dense_solve():
    abcd = random_system(57, seed=3)
    a, b, c, d = abcd
    dense = np.diag(b) + np.diag(a[1:], -1) + np.diag(c[:-1], 1)
    assert np.allclose(
        reference.solve(abcd, m=10, streams=4), np.linalg.solve(dense, d), rtol=1e-13, atol=1e-14
    )


def test_ignores_a0_and_cn():
    abcd = random_system(25, seed=1)
    x = reference.solve(abcd, m=4)
    abcd[0, 0], abcd[2, -1] = 123.0, -77.0
    assert np.array_equal(reference.solve(abcd, m=4), x)


def test_chunk_bounds_cover_every_block_once():
    for blocks in [1, 2, 5, 31, 32, 33, 1000]:
        for streams in [1, 2, 4, 8, 16, 32]:
            chunks = chunk_bounds(blocks, streams)
            covered = [k for s, e in chunks for k in range(s, e)]
            assert covered == list(range(blocks))
            assert len(chunks) == min(blocks, streams)


@pytest.mark.parametrize("bad", [0, -5, "0", "abc", 2.5, "1e-3", (3, 4)])
def test_bad_size(bad):
    with pytest.raises(TridiagError):
        parse_size(bad)


def test_size_spellings():
    assert parse_size("2.5e7") == 25_000_000 and parse_size((1000,)) == 1000 and parse_size(7) == 7


@pytest.mark.parametrize("bad", [0, 3, 6, 64, -2, 2.5, True])
def test_bad_streams(bad):
    with pytest.raises(TridiagError, match="power of two"):
        check_streams(bad)


def test_zero_pivot_in_subsystem():
    abcd = random_system(100, seed=0)
    abcd[1, 11] = 0.0  # first interior row of sub-system 1 (m = 10): its first pivot is exactly zero
    with pytest.raises(ZeroPivotError, match="zero pivot"):
        reference.solve(abcd, m=10)


def test_zero_pivot_in_interface_system():
    n = 20
    abcd = np.zeros((4, n))
    abcd[1] = 1.0
    abcd[1, 0] = 0.0  # row 0 is an interface row with nothing on it: the matrix is singular
    with pytest.raises(ZeroPivotError, match="interface system"):
        reference.solve(abcd, m=10)


def test_workload_interface_numpy():
    work = make_workload("random", "5000", "numpy", seed=2)
    space = work.space()
    assert space.default == {"streams": 1, "threads": 256, "m": 10, "stage2": 0, "copies": 0, "ends": 100}
    configs = space.sample(16, seed=1)
    assert {c["stage2"] for c in configs} == {0, 1}  # both stage-2 placements are in the space
    assert {c["copies"] for c in configs} == {0, 1, 2, 3}  # and every copy pipeline
    assert all(c["stage2"] == 1 for c in configs if c["copies"])  # the ordered ones need stage 2 there
    assert {c["ends"] for c in configs} == {100, 50, 25}
    assert all(c["copies"] in (2, 3) for c in configs if c["ends"] != 100)  # small end chunks: chained ones
    assert len(list(space.grid())) == 6 * 6 * 8 * (1 + 2 + 2 * 3)
    for config in configs:
        assert work.check(config).ok, config
    assert work.check({"streams": 8, "stage2": "gpu"}).ok
    assert work.check({"streams": 8, "stage2": "gpu", "copies": "spike"}).ok
    assert work.check({"streams": 8, "stage2": "gpu", "copies": "spike", "ends": 25}).ok
    timing = work.run({"streams": 4, "threads": 128, "m": 16}, repeats=2)
    assert set(timing.kernels) == {"t1_h2d", "t1_comp", "t1_d2h", "t2_host", "t3_h2d", "t3_comp", "t3_d2h"}
    assert timing.total > 0 and timing.kernels["t1_comp"] > 0 and timing.repeats == 2


def test_workload_check_fails_on_singular_system():
    work = make_workload("heat", 300, "numpy")
    work.abcd[1, 21] = 0.0
    work.abcd[0, 21] = 0.0
    result = work.check({"streams": 2, "threads": 256, "m": 10})
    assert not result.ok and "zero pivot" in result.reason


def test_workload_rejects_bad_options():
    with pytest.raises(TridiagError):
        make_workload("random", 100, "numpy", colour="red")
    with pytest.raises(TridiagError):
        make_workload("nosuchcase", 100, "numpy")
    work = make_workload("random", 100, "numpy")
    with pytest.raises(TridiagError):
        work.run({"streams": 3}, repeats=1)
    with pytest.raises(TridiagError, match="copies='spike' needs stage 2 on the device"):
        work.run({"copies": 3}, repeats=1)
    with pytest.raises(TridiagError, match=r"copies=7 must be one of streams \(0\), ordered \(1\)"):
        work.run({"copies": 7, "stage2": 1}, repeats=1)
    assert work.space().violations({**work.space().default, "copies": 2}) == [
        "copies other than streams (0) need stage 2 on the device (stage2=1)"
    ]
    assert work.space().violations({**work.space().default, "ends": 50}) == [
        "end chunks below 100% apply to copies streamed (2) and spike (3) only"
    ]
    with pytest.raises(
        TridiagError, match=r"ends=50 \(below 100%\) applies to copies streamed and spike only"
    ):
        work.run({"copies": 1, "stage2": 1, "ends": 50}, repeats=1)
    with pytest.raises(TridiagError, match="ends=30 must be one of 100, 50, 25"):
        work.run({"copies": 3, "stage2": 1, "ends": 30}, repeats=1)
