"""The partition method on a CUDA GPU with its transfers chunked over non-blocking streams.

Why raw ``cudaMemcpyAsync`` and not ``ndarray.set/get``: CuPy's ``ndarray.get`` defaults to ``blocking=True``
and synchronizes its stream after every copy, so a loop ``set -> kernel -> get`` over chunks returns to the
host after each chunk and the next chunk's upload cannot start while this one runs: that is why the quick
set/get test in MEASURED.md showed no overlap at any stream count. Here every copy is
``cudaMemcpyAsync``/``cudaMemcpy2DAsync`` between pinned host buffers and device buffers on non-blocking
streams (no implicit sync with the legacy default stream), nothing on the host waits until all of a stage is
enqueued, and the one host wait per stage is on an event.

Streams are created once per solver and reused, as an application would; the seed's per-stream creation cost
tau is measured separately (``benchmarks/tridiag_streams.py``) for the Gomez-Luna estimate.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from kernels.tridiag.host_solver import HostSolver
from kernels.tridiag.system import ZeroPivotError, check_m, check_streams, chunk_bounds, num_blocks

SOURCE = Path(__file__).with_name("partition.cu")
STAGES = ("t1_h2d", "t1_comp", "t1_d2h", "t2_host", "t3_h2d", "t3_comp", "t3_d2h")
F8 = 8  # bytes per float64


@functools.cache
def _module(cp: ModuleType, m: int) -> Any:
    """Compile the kernels for sub-system size ``m`` (a compile-time constant: the work arrays unroll)."""
    module = cp.RawModule(code=SOURCE.read_text(), options=(f"-DM={m}",))
    return module.get_function("stage1"), module.get_function("stage3")


def max_threads(cp: ModuleType, m: int) -> int:
    """Largest block the compiled kernels accept (registers bound it for large ``m``)."""
    k1, k3 = _module(cp, m)
    return min(int(k1.max_threads_per_block), int(k3.max_threads_per_block))


def empty_pinned(cp: ModuleType, shape: tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
    """A numpy array in page-locked host memory: copies from it are DMA at full PCIe rate and truly async."""
    import cupyx

    return cupyx.empty_pinned(shape, dtype=dtype)


@dataclass
class _Chunk:
    s: int  # first sub-system
    e: int  # one past the last
    r0: int  # first row
    r1: int  # one past the last row (clipped to n)
    grid: int
    z_view: Any


class CudaPartitionSolver:
    """One system resident in pinned host memory, solved end to end (host -> device -> host) on demand."""

    def __init__(self, cp: ModuleType, abcd_host: np.ndarray, m: int = 10, threads: int = 256):
        self.cp = cp
        self.m = check_m(m)
        self.n = int(abcd_host.shape[1])
        self.set_threads(threads)
        self.k_stage1, self.k_stage3 = _module(cp, self.m)
        self.p = num_blocks(self.n, self.m)
        self.host = abcd_host  # (4, n) pinned
        self.iface_host = empty_pinned(cp, (4, 2 * self.p))
        self.x_host = empty_pinned(cp, (self.n,))
        self.flag_host = empty_pinned(cp, (1,), np.int32)
        self.dev = cp.empty((4, self.n), dtype=np.float64)
        self.iface_dev = cp.empty((4, 2 * self.p), dtype=np.float64)
        self.z_dev = cp.empty(2 * self.p, dtype=np.float64)
        self.x_dev = cp.empty(self.n, dtype=np.float64)
        self.flag_dev = cp.zeros(1, dtype=np.int32)
        self.host_solver = HostSolver(2 * self.p)
        self.main = cp.cuda.Stream(non_blocking=True)
        self.streams = [cp.cuda.Stream(non_blocking=True) for _ in range(32)]
        self._plans: dict[tuple[int, int], list[_Chunk]] = {}

    def set_threads(self, threads: int) -> None:
        """Threads per block of both kernels; bounded by the compiled kernels' limit for this ``m``."""
        limit = max_threads(self.cp, self.m)
        if not 1 <= int(threads) <= limit:
            raise ValueError(
                f"threads={threads} must be 1..{limit} for m={self.m} (the compiled kernel's limit)"
            )
        self.threads = int(threads)

    def _plan(self, streams: int) -> list[_Chunk]:
        key = (streams, self.threads)
        if key not in self._plans:
            chunks = []
            for s, e in chunk_bounds(self.p, streams):
                r0, r1 = s * self.m, min(e * self.m, self.n)
                grid = max(1, min(-(-(e - s) // self.threads), 1 << 20))
                chunks.append(_Chunk(s, e, r0, r1, grid, self.z_dev[2 * s : 2 * e]))
            self._plans[key] = chunks
        return self._plans[key]

    def solve(self, streams: int = 1, detail: bool = False) -> dict[str, float]:
        """Solve once; the solution lands in ``self.x_host``. Returns milliseconds from CUDA events.

        Always: ``total`` and the spans ``stage1``, ``host``, ``stage3``. With ``detail`` (one stream only, so
        the operations are serial): the seven stage times of ``STAGES``, which add up to ``total``.
        """
        cp = self.cp
        rt = cp.cuda.runtime
        streams = check_streams(streams)
        chunks = self._plan(streams)
        if detail and len(chunks) != 1:
            raise ValueError("per-stage detail needs one stream (with more the stages overlap)")
        h2d, d2h = rt.memcpyHostToDevice, rt.memcpyDeviceToHost
        n8, ld8 = self.n * F8, 2 * self.p * F8
        host_ptr, dev_ptr = self.host.ctypes.data, self.dev.data.ptr
        ih_ptr, id_ptr = self.iface_host.ctypes.data, self.iface_dev.data.ptr
        zh_ptr = self.iface_host[3].ctypes.data
        ev = {k: cp.cuda.Event() for k in ("start", "s1", "s2", "stop")}
        marks: dict[str, Any] = {}

        def mark(name: str, stream: Any) -> None:
            if detail:
                marks[name] = cp.cuda.Event()
                marks[name].record(stream)

        ev["start"].record(self.main)
        used = self.streams[: len(chunks)]
        for st in used:
            st.wait_event(ev["start"])
        # stage 1: upload the chunk's four rows (one 2-D copy), reduce, download its interface rows
        for ch, st in zip(chunks, used, strict=True):
            off = ch.r0 * F8
            rt.memcpy2DAsync(dev_ptr + off, n8, host_ptr + off, n8, (ch.r1 - ch.r0) * F8, 4, h2d, st.ptr)
            mark("h2d1", st)
            with st:
                self.k_stage1(
                    (ch.grid,),
                    (self.threads,),
                    (
                        self.dev,
                        np.int64(self.n),
                        np.int64(ch.s),
                        np.int64(ch.e),
                        self.iface_dev,
                        np.int64(2 * self.p),
                        self.flag_dev,
                    ),
                )
            mark("k1", st)
            off = 2 * ch.s * F8
            rt.memcpy2DAsync(ih_ptr + off, ld8, id_ptr + off, ld8, 2 * (ch.e - ch.s) * F8, 4, d2h, st.ptr)
            done = cp.cuda.Event(disable_timing=True)
            done.record(st)
            self.main.wait_event(done)
        mark("d2h1", self.main)
        rt.memcpyAsync(self.flag_host.ctypes.data, self.flag_dev.data.ptr, 4, d2h, self.main.ptr)
        ev["s1"].record(self.main)
        ev["s1"].synchronize()
        if self.flag_host[0]:
            with self.main:
                self.flag_dev.fill(0)
            self.main.synchronize()
            raise ZeroPivotError(
                "zero pivot inside a sub-system (stage 1): the matrix is singular or not "
                "diagonally dominant enough for elimination without pivoting"
            )
        # stage 2 on the host, in place in the pinned buffer the interface rows arrived in
        self.host_solver.solve(self.iface_host)
        ev["s2"].record(self.main)
        # stage 3: upload the chunk's interface values, solve the interiors, download its unknowns
        for ch, st in zip(chunks, used, strict=True):
            off = 2 * ch.s * F8
            rt.memcpyAsync(self.z_dev.data.ptr + off, zh_ptr + off, 2 * (ch.e - ch.s) * F8, h2d, st.ptr)
            mark("h2d3", st)
            with st:
                self.k_stage3(
                    (ch.grid,),
                    (self.threads,),
                    (self.dev, np.int64(self.n), np.int64(ch.s), np.int64(ch.e), ch.z_view, self.x_dev),
                )
            mark("k3", st)
            off = ch.r0 * F8
            rt.memcpyAsync(
                self.x_host.ctypes.data + off, self.x_dev.data.ptr + off, (ch.r1 - ch.r0) * F8, d2h, st.ptr
            )
            done = cp.cuda.Event(disable_timing=True)
            done.record(st)
            self.main.wait_event(done)
        ev["stop"].record(self.main)
        ev["stop"].synchronize()
        el = cp.cuda.get_elapsed_time
        out = {
            "total": el(ev["start"], ev["stop"]),
            "stage1": el(ev["start"], ev["s1"]),
            "host": el(ev["s1"], ev["s2"]),
            "stage3": el(ev["s2"], ev["stop"]),
        }
        if detail:
            seq = [
                ev["start"],
                marks["h2d1"],
                marks["k1"],
                marks["d2h1"],
                ev["s2"],
                marks["h2d3"],
                marks["k3"],
                ev["stop"],
            ]
            out.update({name: el(a, b) for name, a, b in zip(STAGES, seq[:-1], seq[1:], strict=True)})
        return out
