"""The CUDA partition solver against the numpy reference, for every stream count (runs on the lent GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from launchtune.kernels.tridiag import reference
from launchtune.kernels.tridiag.system import ZeroPivotError, random_system, residual

pytestmark = pytest.mark.gpu

SIZES = [1, 5, 9, 10, 11, 321, 4099, 100_003, 1_000_001]


@pytest.fixture(scope="module")
def cp():
    import cupy

    return cupy


def _pinned_system(cp, n, seed):
    from launchtune.kernels.tridiag.cuda_solver import empty_pinned

    return random_system(n, seed=seed, out=empty_pinned(cp, (4, n)))


@pytest.mark.parametrize("n", SIZES)
def test_every_stream_count_matches_reference(cp, n):
    from launchtune.kernels.tridiag.cuda_solver import CudaPartitionSolver

    rng = np.random.default_rng(n)
    abcd = _pinned_system(cp, n, seed=n)
    for m in (10, int(rng.choice([3, 4, 7, 16, 32]))):
        threads = int(rng.choice([32, 64, 128, 256, 512]))
        solver = CudaPartitionSolver(cp, abcd, m=m, threads=threads)
        ref = reference.solve(abcd, m=m)
        for stage2 in ("host", "gpu"):
            solver.set_stage2(stage2)
            for streams in (1, 2, 4, 8, 16, 32):
                solver.x_host.fill(np.nan)  # poison: every unknown must be written
                times = solver.solve(streams, detail=streams == 1)
                x = np.array(solver.x_host)
                assert np.all(np.isfinite(x)), (n, m, streams, stage2)
                assert residual(abcd, x) < 1e-12, (n, m, streams, threads, stage2)
                assert np.linalg.norm(x - ref) <= 1e-12 * np.linalg.norm(ref), (n, m, streams, stage2)
                assert times["total"] > 0


@pytest.mark.parametrize("stage2", ["host", "gpu"])
def test_stage_times_add_up(cp, stage2):
    from launchtune.kernels.tridiag.cuda_solver import STAGES, CudaPartitionSolver

    solver = CudaPartitionSolver(cp, _pinned_system(cp, 200_000, 1), stage2=stage2)
    times = solver.solve(1, detail=True)
    assert all(times[s] >= 0 for s in STAGES)
    assert sum(times[s] for s in STAGES) == pytest.approx(times["total"], rel=1e-3)


@pytest.mark.parametrize("n", [1000, 2_000_003])
def test_spike_stage_times_are_the_traced_chain(cp, n):
    """The seed's seven stages read off the SPIKE pipeline's one-chunk trace: each step of the chain takes
    time and they follow each other (a negative stage: a mark moved, or the mapping no longer fits)."""
    from launchtune.kernels.tridiag.workload import STAGES, make_workload, spike_stage_times

    work = make_workload("random", n, "cupy", seed=3)
    solver = work.gpu_solver(256, 10, "gpu", "spike")
    solver.trace = True
    for _ in range(3):
        st = spike_stage_times(solver.solve(1))
        assert min(st[s] for s in ("t1_h2d", "t1_comp", "t2_host", "t3_comp", "t3_d2h")) > 0, st
        assert sum(st[s] for s in STAGES) == pytest.approx(st["total"])
    solver.trace = False
    medians = work.stage_times(256, 10, 3, "gpu", "spike")
    assert medians["t1_d2h"] == medians["t3_h2d"] == 0.0 and medians["t1_h2d"] > 0
    assert residual(work.abcd, work.solve(1, 256, 10, "gpu", "spike")) < 1e-12


@pytest.mark.parametrize("stage2", ["host", "gpu"])
@pytest.mark.parametrize("n", [1000, 300_001])
def test_zero_pivot_and_nan_are_reported_and_solver_recovers(cp, stage2, n):
    from launchtune.kernels.tridiag.cuda_solver import CudaPartitionSolver
    from launchtune.kernels.tridiag.system import TridiagError

    abcd = _pinned_system(cp, n, 2)
    solver = CudaPartitionSolver(cp, abcd, stage2=stage2)
    saved = abcd[1, 11]
    abcd[1, 11] = 0.0
    with pytest.raises(ZeroPivotError):
        solver.solve(4)
    abcd[1, 11] = saved
    abcd[3, n // 2] = np.nan
    with pytest.raises((TridiagError, ZeroPivotError, ValueError), match="NaN|zero pivot|singular"):
        solver.solve(4)
    abcd[3, n // 2] = 0.5
    solver.solve(4)
    assert residual(abcd, np.array(solver.x_host)) < 1e-12


@pytest.mark.parametrize("n", [1, 10, 1000, 20_001, 3_000_017])
def test_solve_device_matches_reference(cp, n):
    from launchtune.kernels.tridiag.device_solver import solve_device

    rng = np.random.default_rng(n)
    abcd = random_system(n, seed=n)
    a, b, c, d = (cp.asarray(row) for row in abcd)
    for m in (10, int(rng.choice([3, 16, 32]))):
        ref = reference.solve(abcd, m=m, stage2="gpu")
        x = cp.asnumpy(solve_device(a, b, c, d, m=m))
        assert residual(abcd, x) < 1e-12, (n, m)
        assert np.linalg.norm(x - ref) <= 1e-12 * np.linalg.norm(ref), (n, m)
    assert np.array_equal(cp.asnumpy(d), abcd[3])  # d untouched unless out=d
    solve_device(a, b, c, d, out=d)  # in place
    assert residual(abcd, cp.asnumpy(d)) < 1e-12


def test_solve_device_errors(cp):
    from launchtune.kernels.tridiag.device_solver import DevicePartition, solve_device
    from launchtune.kernels.tridiag.reduced import TridiagMemoryError
    from launchtune.kernels.tridiag.system import TridiagError

    abcd = random_system(5000, seed=1)
    a, b, c, d = (cp.asarray(r) for r in abcd)
    with pytest.raises(TridiagError, match="mismatched lengths"):
        solve_device(a, b, c[:-1], d)
    with pytest.raises(TridiagError, match="CuPy"):
        solve_device(a, b, c, cp.asnumpy(d))
    b2 = b.copy()
    b2[123] = cp.nan
    with pytest.raises(TridiagError, match="NaN or Inf"):
        solve_device(a, b2, c, d)
    b2[123] = 0.0
    a2, c2 = a.copy(), c.copy()
    a2[123] = 0.0
    c2[123] = 0.0
    with pytest.raises(ZeroPivotError):
        solve_device(a2, b2, c2, d)
    x = solve_device(a, b, c, d)  # recovers
    assert residual(abcd, cp.asnumpy(x)) < 1e-12
    with pytest.raises(TridiagMemoryError, match="unknowns need"):
        DevicePartition(cp, 10**11, 10)  # refused before allocating anything


@pytest.mark.parametrize("pivot", [True, False])
def test_device_gtsv(cp, pivot):
    from launchtune.kernels.tridiag.gtsv2 import DeviceGtsv

    abcd = random_system(40_001, seed=5)
    dl, dd, du, b = (cp.asarray(r) for r in abcd)
    g = DeviceGtsv(cp, dl, dd, du, b, pivot=pivot)
    g.run()
    g.stream.synchronize()
    assert residual(abcd, cp.asnumpy(b)) < 1e-12


def test_workload_on_gpu(cp):
    from launchtune.kernels.tridiag.cuda_solver import max_threads
    from launchtune.kernels.tridiag.workload import make_workload

    work = make_workload("heat", 77_777, "cupy")
    rng = np.random.default_rng(3)
    configs = work.space().sample(8, seed=3)
    for copies in (1, 2, 3):  # every copy pipeline of stage 2 on the device, on random launches
        m = int(rng.choice([4, 10, 16]))
        threads = int(rng.choice([t for t in (64, 128, 256) if t <= max_threads(cp, m)]))
        configs.append(
            {
                "streams": int(rng.choice([1, 4, 32])),
                "threads": threads,
                "m": m,
                "stage2": 1,
                "copies": copies,
                "ends": int(rng.choice([100, 50, 25])) if copies > 1 else 100,
            }
        )
    for config in configs:
        check = work.check(config)
        assert check.ok, (config, check.reason)
    timing = work.run({"streams": 8, "threads": 256, "m": 10}, repeats=3)
    assert timing.total > 0 and timing.kernels["t1_h2d"] > 0
    timing = work.run({"streams": 4, "threads": 256, "m": 10, "stage2": 1}, repeats=3)
    k = timing.kernels  # no interface copies with stage 2 on the device: those spans are only the joins
    assert timing.total > 0 and max(k["t1_d2h"], k["t3_h2d"]) < k["t1_h2d"]


@pytest.mark.parametrize("pivot", [True, False])
def test_gtsv2_baseline(cp, pivot):
    from launchtune.kernels.tridiag.gtsv2 import GtsvBaseline

    abcd = _pinned_system(cp, 50_001, 4)
    base = GtsvBaseline(cp, abcd, pivot=pivot)
    assert base.solve() > 0
    assert residual(abcd, np.array(base.x_host)) < 1e-12
    assert 0 < base.buffer_bytes < 1024 * 50_001 + (64 << 20)  # the guard's bound holds for a real answer


@pytest.mark.slow
def test_gtsv2_at_1e8_solves_or_names_its_limit(cp):
    """10^8 unknowns broke the first H200 run (the workspace query answered over 2^63, OverflowError in
    ``cp.empty``). Now gtsv2 either solves it or raises ``GtsvLimitError`` naming the size. Needs ~7 GB of
    host and device memory together."""
    from launchtune.kernels.tridiag.gtsv2 import GtsvBaseline, GtsvLimitError

    n = 10**8
    abcd = np.zeros((4, n))
    abcd[1] = 2.0
    abcd[3] = 2.0  # diagonal system: x = 1
    try:
        base = GtsvBaseline(cp, abcd)
    except GtsvLimitError as exc:
        assert "100,000,000" in str(exc)
        return
    base.solve()
    assert np.all(np.asarray(base.x_host) == 1.0)


def test_graph_solve_matches_reference_on_random_configs(cp):
    """The CUDA-graph replay against the numpy reference: random sizes, m, threads; the same buffers refilled
    with new systems (the graph must read the new values), bit-identical to the launch-by-launch solve."""
    from launchtune.kernels.tridiag.device_solver import DevicePartition

    rng = np.random.default_rng(2121)
    sizes = [1, 7, 1000, 65_537, 1_000_000] + [int(v) for v in rng.integers(2, 1_500_000, size=3)]
    for n in sizes:
        m = int(rng.choice([3, 4, 10, 16, 32]))
        threads = int(rng.choice([32, 64, 128, 256, 512]))
        dp = DevicePartition(cp, n, m, threads=threads)
        rows = tuple(cp.empty(n) for _ in range(4))
        x, x_plain = cp.empty(n), cp.empty(n)
        stream = cp.cuda.Stream(non_blocking=True)
        for seed in (n, n + 1):  # the second system goes into the same buffers: no new capture
            abcd = random_system(n, seed=seed)
            for dst, src in zip(rows, abcd, strict=True):
                dst.set(src)
            x.fill(cp.nan)
            dp.solve_graph(rows, x, stream)
            dp.solve(rows, x_plain, stream)
            got = cp.asnumpy(x)
            ref = reference.solve(abcd, m=m, stage2="gpu")
            assert residual(abcd, got) < 1e-12, (n, m, threads, seed)
            assert np.linalg.norm(got - ref) <= 1e-12 * np.linalg.norm(ref), (n, m, threads, seed)
            assert np.array_equal(got, cp.asnumpy(x_plain)), (n, m, threads)  # same kernels, same bits
        assert dp.graphs.builds == 1, n
        dp.set_threads(64 if dp.threads != 64 else 128)  # another launch configuration: another graph
        dp.solve_graph(rows, x, stream)
        assert dp.graphs.builds == 2 and residual(abcd, cp.asnumpy(x)) < 1e-12


def test_solve_device_graph_default_stream_errors_and_in_place(cp):
    from launchtune.kernels.tridiag.device_solver import solve_device
    from launchtune.kernels.tridiag.system import TridiagError

    n = 200_003
    abcd = random_system(n, seed=5)
    a, b, c, d = (cp.asarray(r) for r in abcd)
    out = cp.empty(n)
    for _ in range(2):  # captured, then replayed (on CuPy's current stream: the legacy default one here)
        out.fill(cp.nan)
        solve_device(a, b, c, d, out=out, graph=True)
        assert residual(abcd, cp.asnumpy(out)) < 1e-12
    saved = float(b[77])
    b[77] = cp.nan
    with pytest.raises(TridiagError, match="NaN or Inf"):
        solve_device(a, b, c, d, out=out, graph=True)  # the same graph reads the new value
    b[77] = 0.0
    a[77] = 0.0
    c[77] = 0.0
    with pytest.raises(ZeroPivotError):
        solve_device(a, b, c, d, out=out, graph=True)
    a[77], b[77], c[77] = abcd[0, 77], saved, abcd[2, 77]
    solve_device(a, b, c, d, out=out, graph=True)  # recovers
    assert residual(abcd, cp.asnumpy(out)) < 1e-12
    solve_device(a, b, c, d, out=d, graph=True)  # in place
    assert residual(abcd, cp.asnumpy(d)) < 1e-12


def test_ordered_copies_match_reference_on_random_configs(cp):
    """Uploads in order on one copy stream, downloads on another (stage 2 on the device): every chunk count,
    random sizes, m and threads, against the numpy reference; errors raised and recovered from."""
    from launchtune.kernels.tridiag.cuda_solver import CudaPartitionSolver
    from launchtune.kernels.tridiag.system import TridiagError

    rng = np.random.default_rng(2122)
    sizes = [1, 9, 4099] + [int(v) for v in rng.integers(2, 1_500_000, size=2)] + [1_000_001]
    for n in sizes:
        m = int(rng.choice([3, 4, 10, 16, 32]))
        threads = int(rng.choice([32, 64, 128, 256, 512]))
        abcd = _pinned_system(cp, n, seed=n + 7)
        solver = CudaPartitionSolver(cp, abcd, m=m, threads=threads, stage2="gpu")
        solver.set_copies("ordered")
        ref = reference.solve(abcd, m=m, stage2="gpu")
        for streams in (1, 2, 4, 8, 16, 32):
            solver.x_host.fill(np.nan)
            t = solver.solve(streams)
            x = np.array(solver.x_host)
            assert residual(abcd, x) < 1e-12, (n, m, threads, streams)
            assert np.linalg.norm(x - ref) <= 1e-12 * np.linalg.norm(ref), (n, m, threads, streams)
            assert t["total"] >= t["stage1"] >= 0 and t["stage2"] >= 0
    saved = abcd[1, 5]
    abcd[1, 5] = np.nan
    with pytest.raises(TridiagError, match="NaN or Inf"):
        solver.solve(4)
    abcd[1, 5] = saved
    solver.solve(4)
    assert residual(abcd, np.array(solver.x_host)) < 1e-12


def test_streamed_stage2_and_staged_levels_match_the_plain_pipeline(cp):
    """Stage 2 reduced chunk by chunk as the chunks arrive (copies="streamed") and the shared-memory staged
    reduced levels give the plain pipeline's answer: random sizes (one to three reduction levels), m, threads
    and chunk counts, against the numpy reference and the plain kernels' interface solution; the SPIKE slices
    (copies="spike") against the reference, with equal and with small end chunks; a NaN is raised and the
    solver recovers, in both."""
    from launchtune.kernels.tridiag.cuda_solver import CudaPartitionSolver, max_threads
    from launchtune.kernels.tridiag.reduced import SLICE_CHOICES
    from launchtune.kernels.tridiag.system import TridiagError

    rng = np.random.default_rng(2124)
    sizes = [1, 9, 4099, 1_000_001, 250_000] + [int(v) for v in rng.integers(2, 3_000_000, size=3)]
    for n in sizes:
        m = 10 if n == 250_000 else int(rng.choice([3, 4, 10, 16, 32]))
        threads = min(int(rng.choice([32, 64, 128, 256, 512])), max_threads(cp, m))  # registers bound it
        abcd = _pinned_system(cp, n, seed=n + 11)
        plain = CudaPartitionSolver(cp, abcd, m=m, threads=threads, stage2="gpu", staged=False)
        # 250,000 unknowns in slices of 32: a top system of 1,564 rows, one pcr_big block
        slice_size = 32 if n == 250_000 else int(rng.choice(SLICE_CHOICES))
        staged = CudaPartitionSolver(cp, abcd, m=m, threads=threads, stage2="gpu", slice_size=slice_size)
        plain.set_copies("ordered")
        staged.set_copies("streamed")
        plain.solve(4)
        x_plain = np.array(plain.x_host)
        z_plain = plain.dp.z.get()
        ref = reference.solve(abcd, m=m, stage2="gpu")
        for streams in (1, 2, 4, 8, 16, 32):
            staged.set_copies("streamed")
            staged.x_host.fill(np.nan)
            t = staged.solve(streams)
            x = np.array(staged.x_host)
            assert residual(abcd, x) < 1e-12, (n, m, threads, streams)
            assert np.linalg.norm(x - ref) <= 1e-12 * np.linalg.norm(ref), (n, m, threads, streams)
            assert np.linalg.norm(x - x_plain) <= 1e-15 * np.linalg.norm(x_plain), (n, m, streams)
            assert np.linalg.norm(staged.dp.z.get() - z_plain) <= 1e-15 * np.linalg.norm(z_plain), (n, m)
            assert t["total"] >= t["stage1"] >= 0 and t["stage2"] >= 0
            staged.set_copies("spike")  # another order of operations: the reference's tolerance
            for ends in (1.0, float(rng.choice([0.5, 0.25, 0.1]))):  # equal chunks, then small end chunks
                staged.set_ends(ends)
                staged.x_host.fill(np.nan)
                t = staged.solve(streams)
                x = np.array(staged.x_host)
                assert residual(abcd, x) < 1e-12, ("spike", n, m, slice_size, streams, ends)
                assert np.linalg.norm(x - ref) <= 1e-12 * np.linalg.norm(ref), ("spike", n, streams, ends)
                assert t["total"] >= t["stage1"] >= 0 and t["stage2"] >= 0
            staged.set_ends(1.0)
    for copies in ("streamed", "spike"):
        staged.set_copies(copies)
        saved = abcd[1, 7]
        abcd[1, 7] = np.inf
        with pytest.raises(TridiagError, match="NaN or Inf"):
            staged.solve(8)
        abcd[1, 7] = saved
        staged.solve(8)
        assert residual(abcd, np.array(staged.x_host)) < 1e-12, copies


def test_staged_spike_kernels_give_the_direct_kernels_bits(cp):
    """The SPIKE way back that stages each warp's rows in shared memory (``spike_back_s``, compiled for
    m <= 11) does the direct kernel's arithmetic: bit for bit the same answer, at random sizes
    (partial last slices and sub-systems, one slice, many), m, slice sizes, chunk counts and end chunks, with
    top systems of one PCR block (so that only the way back differs); past m = 11 the staged solver falls
    back to the direct kernel. A NaN is still found."""
    from launchtune.kernels.tridiag.cuda_solver import CudaPartitionSolver
    from launchtune.kernels.tridiag.device_solver import SPIKE_STAGED_MAX_M
    from launchtune.kernels.tridiag.system import TridiagError

    rng = np.random.default_rng(2511)
    cases = [(1, 10, 512), (9, 3, 32), (5_121, 10, 512), (700_001, 11, 512), (20_000, 12, 64)]
    cases += [(int(rng.integers(2, 400_000)), int(rng.choice([3, 4, 7, 10, 11])), 512) for _ in range(3)]
    for n, m, slice_size in cases:
        abcd = _pinned_system(cp, n, seed=n + 5)
        kw = dict(m=m, threads=128, stage2="gpu", slice_size=slice_size)
        staged = CudaPartitionSolver(cp, abcd, staged=True, **kw)
        direct = CudaPartitionSolver(cp, abcd, staged=False, **kw)
        assert ("spike_back_s" in staged.dp.k) == (m <= SPIKE_STAGED_MAX_M), m
        assert staged.dp.spike.sizes[0] <= 2048, (n, m, slice_size)  # one PCR block: same top-system kernels
        for streams, ends in ((1, 1.0), (4, 1.0), (8, 0.25)):
            answers = []
            for solver in (staged, direct):
                solver.set_copies("spike")
                solver.set_ends(ends)
                solver.x_host.fill(np.nan)
                solver.solve(streams)
                answers.append(np.array(solver.x_host))
            assert residual(abcd, answers[0]) < 1e-12, (n, m, slice_size, streams, ends)
            assert np.array_equal(answers[0], answers[1]), (n, m, slice_size, streams, ends)
    abcd = _pinned_system(cp, 100_000, seed=3)
    staged = CudaPartitionSolver(cp, abcd, m=10, threads=256, stage2="gpu")
    staged.set_copies("spike")
    abcd[2, 54_321] = np.nan
    with pytest.raises(TridiagError, match="NaN or Inf"):
        staged.solve(4)
