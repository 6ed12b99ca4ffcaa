"""The partition method on data already on the GPU: the kernels of every stage, and the device-resident entry.

``DevicePartition`` owns what one system size needs on the device besides the system itself (the reduced
levels of ``reduced.plan_levels`` and an error flag) and enqueues the stages on a given stream without any
host wait: ``stage1`` over a range of sub-systems, ``stage2`` (every reduced level, then one PCR block, then
the back-substitutions), ``stage3`` over a range. ``CudaPartitionSolver`` (host to host, chunked over streams)
and ``solve_device`` (a library call from CuPy code) both drive it. For the host-to-host pipelines that
solve stage 2 chunk by chunk it also enqueues a chunk's share of each level (``reduce``, ``solve_top``,
``back``) and the SPIKE slices (``spike_reduce``, ``spike_top``, ``spike_back``; buffers made on first use).

    x = solve_device(a, b, c, d)            # CuPy float64 rows of one length; a[0], c[-1] ignored
    x = solve_device(a, b, c, d, out=x, graph=True)   # the same arrays again: one CUDA-graph launch

With ``graph`` the whole solve (flag reset, stage 1, every stage-2 launch, stage 3, the flag's copy to the
host: nine operations at 10^6 unknowns) is captured once into a CUDA graph on a private stream and replayed
with one ``cudaGraphLaunch`` on the caller's stream, so the host's per-launch cost (a few microseconds each
through CuPy) no longer sits between the kernels. A graph bakes in the arrays' device pointers, so it is
reused only for the same ``a, b, c, d, out`` (``graph_cache.GraphCache``, four graphs per size at most).

Errors: mismatched lengths or a non-float64 row raise ``TridiagError`` at once; a zero pivot or a NaN/Inf met
on the device sets a flag that ``check`` reads back (one 4-byte copy and a sync) and raises
``ZeroPivotError`` / ``TridiagError``; a size that does not fit raises ``TridiagMemoryError`` before anything
is allocated.
"""

from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from . import reduced
from .graph_cache import GraphCache
from .system import TridiagError, ZeroPivotError, check_m, check_rows, num_blocks

SOURCE = Path(__file__).with_name("partition.cu")
FLAG_ZERO_PIVOT, FLAG_NONFINITE = 1, 2
REDUCED_THREADS = 128  # reduced levels are small; stage3_r with MR = 32 holds ~160 registers per thread
TILE = 32  # sub-systems per block of the shared-memory staged kernels (one warp; a constant of partition.cu)
MAX_GRID = 1 << 20
BIG_SMEM = 4 * reduced.PCR_BIG * 8  # pcr_big's dynamic shared memory: a, 1/b, c, d of 2 x PCR_MAX rows
SPIKE_STAGED_MAX_M = 11  # partition.cu's SPIKE_STAGED: spike_back_s exists for m up to this


@functools.cache
def kernels(cp: ModuleType, m: int, mr: int = reduced.MR, slice_size: int = reduced.SLICE) -> dict[str, Any]:
    """Compile the kernels for sub-system sizes ``m`` (top level) and ``mr`` (reduced levels), and SPIKE
    slices of ``slice_size`` sub-systems (a power of two, 32..512: one block, 48 KiB of shared memory)."""
    if slice_size not in reduced.SLICE_CHOICES:
        choices = ", ".join(map(str, reduced.SLICE_CHOICES))
        raise TridiagError(f"slice_size={slice_size} must be one of {choices}")
    module = cp.RawModule(
        code=SOURCE.read_text(),
        options=(f"-DM={m}", f"-DMR={mr}", f"-DPCR_MAX={reduced.PCR_MAX}", f"-DSLICE={slice_size}"),
    )
    plain = ("stage1", "stage3", "stage1_r", "stage3_r")
    staged = ("stage1_rs", "stage3_rs")  # the reduced levels staged in shared memory (issue 21)
    spike = ("spike_reduce", "spike_back")
    spike_staged = ("spike_back_s",) if m <= SPIKE_STAGED_MAX_M else ()  # rows staged in shared memory
    names = (*plain, *staged, "pcr_small", "pcr_big", *spike, *spike_staged)
    out = {name: module.get_function(name) for name in names}
    out["pcr_big"].max_dynamic_shared_size_bytes = BIG_SMEM  # over the 48 KiB a block gets without asking
    return out


def max_threads(cp: ModuleType, m: int) -> int:
    """Largest block the top-level kernels accept (registers bound it for large ``m``)."""
    k = kernels(cp, m)
    return min(int(k["stage1"].max_threads_per_block), int(k["stage3"].max_threads_per_block))


def free_device_bytes(cp: ModuleType) -> tuple[int, str]:
    """Free bytes on the current device (CuPy's cached blocks counted as free) and the device's name."""
    pool = cp.get_default_memory_pool()
    free, _total = cp.cuda.runtime.memGetInfo()
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return int(free) + int(pool.free_bytes()), name


def _grid(count: int, threads: int) -> int:
    return max(1, min(-(-count // threads), MAX_GRID))


Call = tuple[Any, tuple[int], tuple[int], tuple[Any, ...]]


def level_call(
    k: dict[str, Any],
    rows: list[tuple],
    sizes: list[int],
    flag: Any,
    staged: bool,
    lvl: int,
    lo: int,
    hi: int,
    up: bool,
) -> Call:
    """The launch of level ``lvl``'s groups ``[lo, hi)`` of ``reduced.MR`` rows: stage 1 into level
    ``lvl + 1`` (``up``) or stage 3 from its solution (the way back)."""
    t = TILE if staged else REDUCED_THREADS
    name = ("stage1_rs" if up else "stage3_rs") if staged else ("stage1_r" if up else "stage3_r")
    lv, nxt, size = rows[lvl], rows[lvl + 1], np.int64(sizes[lvl])
    if up:
        args: tuple = (*lv, size, np.int64(lo), np.int64(hi), *nxt, flag)
    else:
        args = (*lv, size, np.int64(lo), np.int64(hi), nxt[3], lv[3])
    return k[name], (_grid(hi - lo, t),), (t,), args


def level_calls(
    k: dict[str, Any], rows: list[tuple], sizes: list[int], flag: Any, staged: bool
) -> list[Call]:
    """(kernel, grid, block, args) of every launch that solves the system ``rows[0]`` in place (its ``d``
    row becomes the solution): each partition level of ``reduced.MR`` rows, one PCR block, the
    back-substitutions."""
    groups = [num_blocks(size, reduced.MR) for size in sizes[:-1]]
    calls = [level_call(k, rows, sizes, flag, staged, lvl, 0, g, True) for lvl, g in enumerate(groups)]
    last = (*rows[-1], np.int64(sizes[-1]), flag)
    calls.append((k["pcr_small"], (1,), (reduced.pcr_block(sizes[-1]),), last))
    back = [level_call(k, rows, sizes, flag, staged, lvl, 0, g, False) for lvl, g in enumerate(groups)]
    return calls + back[::-1]


class Spike:
    """What the SPIKE slices need on the device for ``p`` sub-systems: each slice's P, R, Q (``3 x slices x
    2 SLICE``), its two outer couplings, and the top system (two rows per slice) with its reduced levels."""

    def __init__(self, cp: ModuleType, k: dict[str, Any], p: int, flag: Any, staged: bool, slice_size: int):
        self.size = slice_size
        self.slices = -(-p // slice_size)
        need = reduced.spike_bytes(p, slice_size)
        free, name = free_device_bytes(cp)
        if need > free:
            raise reduced.TridiagMemoryError(
                f"the SPIKE slices of {p:,} sub-systems need {need / 1e9:.2f} GB on {name}, "
                f"{free / 1e9:.2f} GB free"
            )
        self.prq = cp.empty((3, self.slices * 2 * slice_size), dtype=np.float64)
        self.ends = cp.empty((2, self.slices), dtype=np.float64)
        self.sizes = reduced.top_levels(2 * self.slices)
        self.levels = [cp.empty((4, s), dtype=np.float64) for s in self.sizes]
        self.rows = [tuple(lv[i] for i in range(4)) for lv in self.levels]
        if len(self.sizes) == 1 and self.sizes[0] > reduced.PCR_MAX:  # one pcr_big block
            big = functools.partial(k["pcr_big"], shared_mem=BIG_SMEM)
            args = (*self.rows[0], np.int64(self.sizes[0]), flag)
            self.calls = [(big, (1,), (reduced.PCR_MAX,), args)]
        else:
            self.calls = level_calls(k, self.rows, self.sizes, flag, staged)

    def span(self, s: int, e: int) -> tuple[int, int]:
        """The slices that sub-systems ``[s, e)`` fill (``s`` on a slice edge)."""
        return s // self.size, -(-e // self.size)


class DevicePartition:
    """Reduced levels and kernels for systems of ``n`` unknowns; stages enqueued on the caller's streams."""

    def __init__(
        self,
        cp: ModuleType,
        n: int,
        m: int = 10,
        threads: int = 256,
        resident: bool = True,
        check: bool = True,
        staged: bool = True,
        slice_size: int = reduced.SLICE,
    ):
        """``check``: refuse a size that does not fit before allocating; ``resident``: the caller's system is
        on the device already and only ``x`` comes on top (else the caller allocates the system after this
        check, which counts it); ``staged``: the reduced levels' kernels stage each warp's rows in shared
        memory (``stage1_rs``/``stage3_rs``: the same bits, a shorter chain of memory latencies) rather than
        reading every row from global memory (``stage1_r``/``stage3_r``), and so does the SPIKE way back
        for ``m`` up to ``SPIKE_STAGED_MAX_M`` (``spike_back_s``: coalesced loads and stores, the same
        bits)."""
        self.cp, self.n, self.m = cp, int(n), check_m(m)
        self.staged = bool(staged)
        self.slice_size = int(slice_size)
        self.mr = reduced.MR
        if check:
            free, name = free_device_bytes(cp)
            reduced.check_fits(self.n, self.m, free, device=name, resident=resident)
        self.k = kernels(cp, self.m, self.mr, self.slice_size)
        self.set_threads(threads)
        self.p = num_blocks(self.n, self.m)
        self.sizes = reduced.plan_levels(2 * self.p, self.mr)
        self.levels = [cp.empty((4, s), dtype=np.float64) for s in self.sizes]
        self.rows = [tuple(lv[i] for i in range(4)) for lv in self.levels]  # views made once, not per launch
        self.pcr_threads = reduced.pcr_block(self.sizes[-1])
        self.flag = cp.zeros(1, dtype=np.int32)
        self._levels = (self.k, self.rows, self.sizes, self.flag, self.staged)  # what level_call needs
        self._stage2_calls = level_calls(*self._levels)
        self._spike: Spike | None = None
        self.graphs = GraphCache(limit=4)
        self._capture_stream: Any = None
        self.flag_host = np.zeros(1, dtype=np.int32)
        try:
            import cupyx

            self.flag_host = cupyx.empty_pinned((1,), dtype=np.int32)
        except Exception:  # pinned or not, the flag copy is 4 bytes
            pass

    def set_threads(self, threads: int) -> None:
        limit = max_threads(self.cp, self.m)
        if not 1 <= int(threads) <= limit:
            raise ValueError(f"threads={threads} must be 1..{limit} for m={self.m} (the kernels' limit)")
        self.threads = int(threads)

    @property
    def z(self) -> Any:
        """The interface solution, 2 per sub-system (written by ``stage2`` or uploaded by the host stage)."""
        return self.rows[0][3]

    # -- enqueue (no host waits) ---------------------------------------------------------------------------
    def reset_flag(self, stream: Any) -> None:
        self.cp.cuda.runtime.memsetAsync(self.flag.data.ptr, 0, 4, stream.ptr)

    def stage1(self, rows: tuple[Any, Any, Any, Any], s: int, e: int, stream: Any) -> None:
        """Interface rows of sub-systems ``[s, e)`` into the first level."""
        with stream:
            self.k["stage1"](
                (_grid(e - s, self.threads),),
                (self.threads,),
                (*rows, np.int64(self.n), np.int64(s), np.int64(e), *self.rows[0], self.flag),
            )

    def stage2(self, stream: Any) -> None:
        """Solve the first level in place (its ``d`` row becomes ``z``): reduce, PCR, back-substitute."""
        with stream:
            for kernel, grid, block, args in self._stage2_calls:
                kernel(grid, block, args)

    # -- stage 2 chunk by chunk ("streamed": a chunk's interface rows reduced right after its stage 1) -------
    @property
    def unit(self) -> int:
        """Sub-systems per aligned chunk unit (``reduced.chunk_unit``): a chunk with edges on it reduces into
        whole groups of every level, so its reduction and back-substitution are its own."""
        return reduced.chunk_unit(self.sizes, self.mr)

    def level_groups(self, s: int, e: int) -> list[tuple[int, int]]:
        """The groups of each reduced level that sub-systems ``[s, e)`` feed (``reduced.level_groups``)."""
        return reduced.level_groups(self.sizes, self.p, s, e, self.mr)

    def reduce(self, s: int, e: int, stream: Any) -> None:
        """Every reduction level of sub-systems ``[s, e)`` (after their ``stage1``), aligned to ``unit``."""
        with stream:
            for lvl, (lo, hi) in enumerate(self.level_groups(s, e)):
                if hi > lo:
                    kernel, grid, block, args = level_call(*self._levels, lvl, lo, hi, True)
                    kernel(grid, block, args)

    def solve_top(self, stream: Any) -> None:
        """The last level, by one PCR block (once every chunk is reduced)."""
        kernel, grid, block, args = self._stage2_calls[len(self.sizes) - 1]
        with stream:
            kernel(grid, block, args)

    def back(self, s: int, e: int, stream: Any) -> None:
        """Every back-substitution level of sub-systems ``[s, e)``, top down: their ``z`` for ``stage3``."""
        with stream:
            for lvl, (lo, hi) in reversed(list(enumerate(self.level_groups(s, e)))):
                if hi > lo:
                    kernel, grid, block, args = level_call(*self._levels, lvl, lo, hi, False)
                    kernel(grid, block, args)

    # -- SPIKE slices (copies="spike"): stage 1 and a slice's interface block in one kernel, a top system --
    @property
    def spike(self) -> Spike:
        """The slices' device buffers, made on first use (``TridiagMemoryError`` if they do not fit)."""
        if self._spike is None:
            self._spike = Spike(self.cp, self.k, self.p, self.flag, self.staged, self.slice_size)
        return self._spike

    def _spike_kernel(self, name: str) -> str:
        """``name`` or its staged variant (``staged`` and compiled for this ``m``: ``spike_back_s``)."""
        return name + "_s" if self.staged and name + "_s" in self.k else name

    def spike_reduce(self, rows: tuple[Any, Any, Any, Any], s: int, e: int, stream: Any) -> None:
        """Stage 1, then each slice's P, R, Q and top rows, for sub-systems ``[s, e)`` (``s`` on a slice
        edge)."""
        sp = self.spike
        lo, hi = sp.span(s, e)
        args = (*rows, np.int64(self.n), np.int64(self.p), np.int64(lo), np.int64(hi), np.int64(sp.slices))
        with stream:
            self.k["spike_reduce"](
                (min(hi - lo, MAX_GRID),), (sp.size,), (*args, sp.prq, sp.ends, *sp.rows[0], self.flag)
            )

    def spike_top(self, stream: Any) -> None:
        """Solve the top system (two unknowns per slice) in place, once every slice is reduced."""
        with stream:
            for kernel, grid, block, args in self.spike.calls:
                kernel(grid, block, args)

    def spike_back(self, rows: tuple[Any, Any, Any, Any], s: int, e: int, x: Any, stream: Any) -> None:
        """Each slice's interface values from its spikes and the top solution, then stage 3, into ``x``."""
        sp = self.spike
        lo, hi = sp.span(s, e)
        args = (*rows, np.int64(self.n), np.int64(self.p), np.int64(lo), np.int64(hi), np.int64(sp.slices))
        with stream:
            self.k[self._spike_kernel("spike_back")](
                (min(hi - lo, MAX_GRID),), (sp.size,), (*args, sp.prq, sp.ends, sp.rows[0][3], x)
            )

    def stage3(self, rows: tuple[Any, Any, Any, Any], s: int, e: int, x: Any, stream: Any) -> None:
        """Every unknown of sub-systems ``[s, e)`` into ``x`` (which may be ``rows[3]``: in place)."""
        with stream:
            self.k["stage3"](
                (_grid(e - s, self.threads),),
                (self.threads,),
                (*rows, np.int64(self.n), np.int64(s), np.int64(e), self.z, x),
            )

    def fetch_flag(self, stream: Any) -> None:
        """Enqueue the flag's copy to the host (read it with ``raise_flag`` after the stream is synced)."""
        rt = self.cp.cuda.runtime
        rt.memcpyAsync(self.flag_host.ctypes.data, self.flag.data.ptr, 4, rt.memcpyDeviceToHost, stream.ptr)

    def raise_flag(self) -> None:
        """``ZeroPivotError`` / ``TridiagError`` if the last fetched flag says so."""
        flag = int(self.flag_host[0])
        self.flag_host[0] = 0
        # a zero pivot first: it makes everything after it Inf or NaN, so both flags are set then
        if flag & FLAG_ZERO_PIVOT:
            raise ZeroPivotError(
                "zero pivot on the device (a sub-system or the reduced system): the matrix is singular or "
                "not diagonally dominant enough for elimination without pivoting"
            )
        if flag & FLAG_NONFINITE:
            raise TridiagError("NaN or Inf in the system (met on the device): check a, b, c and d")

    def solve(self, rows: tuple[Any, Any, Any, Any], x: Any, stream: Any, check: bool = True) -> Any:
        """The whole system on one stream; with ``check`` one sync at the end and the flag raised."""
        self.reset_flag(stream)
        self.stage1(rows, 0, self.p, stream)
        self.stage2(stream)
        self.stage3(rows, 0, self.p, x, stream)
        if check:
            self.fetch_flag(stream)
            stream.synchronize()
            self.raise_flag()
        return x

    # -- CUDA graph of one whole solve ---------------------------------------------------------------------
    def graph(self, rows: tuple[Any, Any, Any, Any], x: Any) -> Any:
        """The captured graph of ``solve(rows, x)`` (flag reset .. flag fetched), captured on first use.

        Captured on a private non-blocking stream (capture is not allowed on the legacy default stream), so
        the graph can then be launched on any stream, the default one included. Keyed by the device pointers
        and the launch configuration baked into it.
        """
        key = (tuple(int(r.data.ptr) for r in rows), int(x.data.ptr), self.threads)
        return self.graphs.get(key, lambda: self._capture(rows, x))

    def _capture(self, rows: tuple[Any, Any, Any, Any], x: Any) -> Any:
        if self._capture_stream is None:
            self._capture_stream = self.cp.cuda.Stream(non_blocking=True)
        st = self._capture_stream
        st.begin_capture()
        try:
            self.reset_flag(st)
            self.stage1(rows, 0, self.p, st)
            self.stage2(st)
            self.stage3(rows, 0, self.p, x, st)
            self.fetch_flag(st)
        finally:
            graph = st.end_capture()  # ends the capture even when an enqueue failed: the stream stays usable
        return graph

    def solve_graph(self, rows: tuple[Any, Any, Any, Any], x: Any, stream: Any, check: bool = True) -> Any:
        """``solve`` as one graph launch on ``stream``; with ``check`` one sync and the flag raised."""
        self.graph(rows, x).launch(stream)
        if check:
            stream.synchronize()
            self.raise_flag()
        return x


@functools.lru_cache(maxsize=4)
def _solver(cp: ModuleType, n: int, m: int, device: int) -> DevicePartition:
    return DevicePartition(cp, n, m, resident=True)  # refuses a size that does not fit, before allocating


def solve_device(
    a: Any,
    b: Any,
    c: Any,
    d: Any,
    m: int = 10,
    out: Any = None,
    stream: Any = None,
    check: bool = True,
    graph: bool = False,
) -> Any:
    """Solve ``a[i] x[i-1] + b[i] x[i] + c[i] x[i+1] = d[i]`` for CuPy float64 rows already on the GPU.

    The answer stays on the device: ``out`` (new if not given; it may be ``d`` itself, to solve in place).
    Runs on ``stream`` (default: CuPy's current stream). ``check`` syncs once at the end to raise on a zero
    pivot or a NaN/Inf; without it the call returns as soon as the work is enqueued. The reduced levels for
    each (n, m) are kept between calls (four sizes at most). ``graph``: replay the whole solve as one CUDA
    graph (captured on the first call for these arrays; pays off when the same ``a, b, c, d, out`` are solved
    again, as in a time stepper; with ``out=None`` every call gets a new ``out`` and so a new capture).
    """
    import cupy as cp

    n = check_rows(a, b, c, d)
    for name, row in zip("abcd", (a, b, c, d), strict=True):
        if not isinstance(row, cp.ndarray) or not row.flags.c_contiguous:
            raise TridiagError(f"{name} must be a contiguous CuPy array on the device")
    solver = _solver(cp, n, check_m(m), cp.cuda.Device().id)
    if out is None:
        out = cp.empty(n, dtype=np.float64)
    elif out.shape != (n,) or out.dtype != np.float64 or not out.flags.c_contiguous:
        raise TridiagError(f"out must be a contiguous float64 array of {n} entries, not {out.shape}")
    stream = stream if stream is not None else cp.cuda.get_current_stream()
    if graph:
        return solver.solve_graph((a, b, c, d), out, stream, check=check)
    return solver.solve((a, b, c, d), out, stream, check=check)
