"""Stage 2 on the device, in numpy: the reduced-system solver (partition levels, then PCR), its levels,
the device-memory account, and the input checks shared by every entry point."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import solve_banded

from launchtune.kernels.tridiag import partition, reduced, reference
from launchtune.kernels.tridiag.system import (
    TridiagError,
    ZeroPivotError,
    check_rows,
    check_stage2,
    check_system,
    random_system,
    residual,
    to_banded,
)


def _exact(abcd: np.ndarray) -> np.ndarray:
    return solve_banded((1, 1), to_banded(abcd), abcd[3])


@pytest.mark.parametrize("n", [1, 2, 3, 31, 32, 33, 500, 1023, 1024])
def test_pcr_matches_lapack(n):
    abcd = random_system(n, seed=n)
    x = reduced.pcr(abcd)
    assert np.allclose(x, _exact(abcd), rtol=1e-13, atol=1e-15)
    assert residual(abcd, x) < 1e-13


def test_pcr_width_padding_does_not_change_the_answer():
    abcd = random_system(100, seed=5)
    assert np.allclose(reduced.pcr(abcd), reduced.pcr(abcd, width=1024), rtol=1e-14, atol=0)


def test_pcr_block_is_a_power_of_two_warp_or_more():
    assert [reduced.pcr_block(n) for n in (1, 32, 33, 1000, 1024)] == [32, 32, 64, 1024, 1024]
    with pytest.raises(TridiagError, match="1..1024"):
        reduced.pcr_block(1025)


@pytest.mark.parametrize("n", [1025, 4099, 50_001, 300_000])
@pytest.mark.parametrize("mr", [3, 8, 32])
def test_solve_reduced_matches_lapack(n, mr):
    abcd = random_system(n, seed=n + mr)
    x = reduced.solve_reduced(abcd.copy(), mr=mr)
    assert residual(abcd, x) < 1e-13
    assert np.linalg.norm(x - _exact(abcd)) <= 1e-13 * np.linalg.norm(x)


def test_interface_system_through_the_device_path_equals_the_host_path():
    """The interface system of a real partition, solved both ways (what stage2=host / gpu change)."""
    abcd = random_system(123_457, seed=9)
    blocks = partition.padded_blocks(abcd, 10)
    iface = partition.stage1(blocks)
    z_gpu = reduced.solve_reduced(iface.copy())
    z_host = partition.stage2(iface.copy())
    assert np.linalg.norm(z_gpu - z_host) <= 1e-13 * np.linalg.norm(z_host)


@pytest.mark.parametrize("n", [1, 7, 10, 11, 4099, 200_003])
@pytest.mark.parametrize("streams", [1, 4, 32])
def test_partition_solve_with_gpu_stage2(n, streams):
    rng = np.random.default_rng(n + streams)
    m = int(rng.choice([3, 10, 16, 32]))
    abcd = random_system(n, seed=n)
    x = reference.solve(abcd, m=m, streams=streams, stage2="gpu")
    assert residual(abcd, x) < 1e-12
    ref = reference.solve(abcd, m=m, streams=streams, stage2="host")
    assert np.linalg.norm(x - ref) <= 1e-12 * np.linalg.norm(ref)


def test_plan_levels():
    assert reduced.plan_levels(2_000_000) == [2_000_000, 125_000, 7_814, 490]
    assert reduced.plan_levels(1024) == [1024]
    assert reduced.plan_levels(1025, mr=32) == [1025, 66]
    for n in (1, 999, 10**6, 2 * 10**8):
        sizes = reduced.plan_levels(n, mr=8)
        assert sizes[-1] <= reduced.PCR_MAX
        assert all(b < a for a, b in zip(sizes, sizes[1:], strict=False))
    with pytest.raises(TridiagError, match="mr=2"):
        reduced.plan_levels(100, mr=2)


def test_zero_pivot_in_the_reduced_system_is_named():
    n = 5000  # level 0 > 1024 so the partition levels run before PCR
    iface = random_system(n, seed=1)
    iface[:, 40] = (0.0, 0.0, 0.0, 1.0)  # an empty row: singular
    with pytest.raises(ZeroPivotError, match="zero pivot"):
        reduced.solve_reduced(iface)
    small = random_system(100, seed=2)
    small[:, 7] = (0.0, 0.0, 0.0, 1.0)
    with pytest.raises(ZeroPivotError, match="PCR"):
        reduced.pcr(small)


def test_nan_in_the_reduced_system_is_named():
    small = random_system(100, seed=3)
    small[3, 50] = np.nan
    with pytest.raises(TridiagError, match="NaN"):
        reduced.pcr(small)


def test_memory_account_and_limit():
    # 32 B/unknown for the system (x written over d) + 4 rows of 2n/m (+ 1/16 of that per level)
    per = reduced.device_bytes(10**8, 10) / 10**8
    assert 38.4 < per < 39.0
    assert reduced.device_bytes(10**8, 10, resident=True) < reduced.device_bytes(10**8, 10)
    limit = reduced.max_unknowns(80 * 10**9, 10)
    assert 2.0e9 < limit < 2.1e9
    assert reduced.device_bytes(limit, 10) <= 80 * 10**9 < reduced.device_bytes(limit + 1, 10)
    reduced.check_fits(10**8, 10, 80 * 10**9)  # fits
    with pytest.raises(reduced.TridiagMemoryError, match=r"n = 3,000,000,000 unknowns need .* GB on card X"):
        reduced.check_fits(3 * 10**9, 10, 80 * 10**9, device="card X")
    assert issubclass(reduced.TridiagMemoryError, MemoryError)


def test_check_system_names_the_problem():
    abcd = random_system(10, seed=0)
    assert check_system(abcd) is abcd
    abcd[0, 0] = np.nan  # a[0] is ignored
    check_system(abcd)
    abcd[1, 4] = np.inf
    with pytest.raises(TridiagError, match=r"NaN or Inf in b\[4\]"):
        check_system(abcd)
    with pytest.raises(TridiagError, match=r"\(4, n\)"):
        check_system(np.zeros((3, 10)))
    with pytest.raises(TridiagError, match="float64"):
        check_system(np.zeros((4, 10), dtype=np.float32))


def test_check_rows_mismatched_lengths():
    a, b, c, d = (np.zeros(5) for _ in range(4))
    assert check_rows(a, b, c, d) == 5
    with pytest.raises(TridiagError, match="mismatched lengths: a, b, c, d have 5, 5, 4, 5"):
        check_rows(a, b, np.zeros(4), d)
    with pytest.raises(TridiagError, match="1-D"):
        check_rows(a, np.zeros((5, 1)), c, d)
    with pytest.raises(TridiagError, match="float64"):
        check_rows(a, b, c, np.zeros(5, dtype=np.float32))


def test_check_stage2():
    assert check_stage2("gpu") == "gpu"
    with pytest.raises(TridiagError, match="stage2='cpu'"):
        check_stage2("cpu")


@pytest.mark.parametrize("n", [1, 9, 10, 11, 1000, 33_333])
@pytest.mark.parametrize("m", [3, 10, 32])
@pytest.mark.parametrize("streams", [1, 2, 8, 32])
def test_chunk_rows_cover_every_row_once_on_sub_system_edges(n, m, streams):
    from launchtune.kernels.tridiag.system import chunk_rows, num_blocks

    chunks = chunk_rows(n, m, streams)
    assert 1 <= len(chunks) <= streams
    assert chunks[0][0] == 0 and chunks[-1][1] == num_blocks(n, m)
    assert chunks[0][2] == 0 and chunks[-1][3] == n
    for (s, e, r0, r1), nxt in zip(chunks, chunks[1:] + [None], strict=True):
        assert e > s and r0 == s * m and r1 == min(e * m, n) and r1 > r0
        if nxt is not None:
            assert nxt[0] == e and nxt[2] == r1  # contiguous, no gap, no overlap
    sizes = [e - s for s, e, _, _ in chunks]
    assert max(sizes) - min(sizes) <= 1  # near-equal


def test_workload_stage2_parameter():
    from launchtune.kernels.tridiag.workload import make_workload

    work = make_workload("random", 3000, "numpy", seed=1)
    assert work.check({"stage2": 1, "streams": 4}).ok
    assert work.check({"stage2": "host"}).ok
    for bad in (2, "cpu", True):
        with pytest.raises(TridiagError, match="stage2"):
            work.check({"stage2": bad})
    t = work.run({"stage2": "gpu", "streams": 2}, repeats=1)
    assert t.extra["stage2"] == "gpu" and t.extra["host_solver"] == "device-pcr"


def test_copies_choice_is_checked():
    from launchtune.kernels.tridiag.system import COPY_CHOICES, check_copies

    assert [check_copies(c) for c in COPY_CHOICES] == list(COPY_CHOICES)
    with pytest.raises(TridiagError, match="copies=.pipelined. must be one of streams, ordered, streamed"):
        check_copies("pipelined")


@pytest.mark.parametrize("n", [1, 9, 5_000, 1_000_001, 10_000_000, 123_456_789])
@pytest.mark.parametrize("m", [3, 10, 32])
@pytest.mark.parametrize("streams", [1, 2, 7, 32])
def test_streamed_chunks_reduce_into_their_own_groups(n, m, streams):
    """Chunks on ``chunk_unit`` edges: at every reduced level their groups tile the level exactly once, and
    each group's sub-systems lie in its chunk (so a chunk's reduction needs no other chunk's rows)."""
    from launchtune.kernels.tridiag.reduced import chunk_unit, level_groups
    from launchtune.kernels.tridiag.system import chunk_bounds, num_blocks

    p = num_blocks(n, m)
    sizes = reduced.plan_levels(2 * p)
    unit = chunk_unit(sizes)
    assert unit == 16 ** (len(sizes) - 1)
    chunks = chunk_bounds(p, streams, unit)
    assert chunks[0][0] == 0 and chunks[-1][1] == p and len(chunks) <= streams
    assert all(s % unit == 0 for s, _ in chunks)
    per_chunk = [level_groups(sizes, p, s, e) for s, e in chunks]
    for lvl, size in enumerate(sizes[:-1]):
        ranges = [groups[lvl] for groups in per_chunk]
        assert ranges[0][0] == 0 and ranges[-1][1] == num_blocks(size, reduced.MR)
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))  # no gap, no overlap
        span = 16 ** (lvl + 1)  # sub-systems per group of this level
        for (s, e), (lo, hi) in zip(chunks, ranges, strict=True):
            assert lo * span >= s and (hi * span <= e or e == p)


def test_chunk_bounds_on_a_unit():
    from launchtune.kernels.tridiag.system import chunk_bounds

    assert chunk_bounds(1000, 4, 256) == [(0, 256), (256, 512), (512, 768), (768, 1000)]
    assert chunk_bounds(100, 3, 256) == [(0, 100)]  # fewer units than chunks: fewer chunks
    assert chunk_bounds(100_000, 4) == [(0, 25_000), (25_000, 50_000), (50_000, 75_000), (75_000, 100_000)]
    with pytest.raises(TridiagError, match="unit=0"):
        chunk_bounds(10, 2, 0)


@pytest.mark.parametrize(
    "n, rows", [(1, 4), (2, 2), (5, 4), (2_000, 64), (3_001, 256), (40_000, 1_024), (3_000, 4), (20_000, 4)]
)
def test_solve_spike_matches_banded_solve(n, rows):
    """The SPIKE slices' numpy reference (what spike_reduce / spike_back compute): slices solved with their
    couplings cut, a tridiagonal top system of two rows per slice, the spikes' correction."""
    iface = random_system(n, seed=n + rows)
    z = reduced.solve_spike(iface, rows=rows)
    ref = _exact(iface)
    assert np.linalg.norm(z - ref) <= 1e-14 * np.linalg.norm(ref)


def test_spike_top_rows_of_an_uncoupled_slice_give_its_own_ends():
    """With no outer couplings the top rows must return the slice's own P at both ends."""
    ends = np.array([[0.3, -0.7], [0.9, 0.01], [0.02, 0.8]])  # P, R, Q at the first and last row
    top = reduced.spike_top_rows(ends, a_first=0.0, c_last=0.0)
    assert top[0, 0] == 0.0 and top[2, 1] == 0.0
    u, w = np.linalg.solve(np.array([[top[1, 0], top[2, 0]], [top[0, 1], top[1, 1]]]), top[3])
    assert u == pytest.approx(0.3) and w == pytest.approx(-0.7)


def test_spike_top_system_takes_one_big_pcr_block_up_to_twice_pcr_max():
    assert reduced.top_levels(1_024) == [1_024]
    assert reduced.top_levels(1_500) == [1_500]  # pcr_big: no partition level, no way back
    assert reduced.top_levels(2_048) == [2_048]
    assert reduced.top_levels(2_050) == reduced.plan_levels(2_050) and len(reduced.top_levels(2_050)) == 2


@pytest.mark.parametrize("streams", [3, 4, 8])
@pytest.mark.parametrize("ends", [0.5, 0.25, 0.1])
def test_chunk_bounds_with_small_end_chunks(streams, ends):
    from launchtune.kernels.tridiag.system import chunk_bounds

    blocks, unit = 196 * 512, 512  # 10^6 unknowns at m = 10, SPIKE slices of 512 sub-systems
    chunks = chunk_bounds(blocks, streams, unit, ends)
    sizes = [e - s for s, e in chunks]
    assert chunks[0][0] == 0 and chunks[-1][1] == blocks and len(chunks) == streams
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:], strict=False))
    assert all(s % unit == 0 for s, _ in chunks)
    inner = np.mean(sizes[1:-1])
    for end in (sizes[0], sizes[-1]):  # the ends' share of an inner chunk, to the nearest unit
        assert abs(end - ends * inner) <= unit
    assert chunk_bounds(blocks, 2, unit, ends) == chunk_bounds(blocks, 2, unit)  # two chunks are both ends
    assert chunk_bounds(blocks, streams, unit, 1.0) == chunk_bounds(blocks, streams, unit)


@pytest.mark.parametrize("ends", [0.0, -0.5, 1.5, float("nan")])
def test_chunk_bounds_refuse_bad_end_shares(ends):
    from launchtune.kernels.tridiag.system import TridiagError, chunk_bounds

    with pytest.raises(TridiagError, match="chunk ends=.* must be in"):
        chunk_bounds(1000, 4, 1, ends)
