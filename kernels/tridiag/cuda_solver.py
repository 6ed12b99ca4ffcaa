"""The partition method on a CUDA GPU, host to host, with its transfers chunked over non-blocking streams.

Why raw ``cudaMemcpyAsync`` and not ``ndarray.set/get``: CuPy's ``ndarray.get`` defaults to ``blocking=True``
and synchronizes its stream after every copy, so a loop ``set -> kernel -> get`` over chunks returns to the
host after each chunk and the next chunk's upload cannot start while this one runs: that is why the quick
set/get test in MEASURED.md showed no overlap at any stream count. Here every copy is
``cudaMemcpyAsync``/``cudaMemcpy2DAsync`` between pinned host buffers and device buffers on non-blocking
streams (no implicit sync with the legacy default stream).

Two pipelines, by where stage 2 runs (the tunable ``stage2``):

* ``host`` (the seed's): chunk j's upload, stage 1 and the download of its interface rows on stream j; one
  host wait; the interface system solved on the host (``host_solver``); then chunk j's upload of its interface
  values, stage 3 and the download of its unknowns on stream j.
* ``gpu``: chunk j's upload and stage 1 on stream j (stage 1 of chunk j runs while chunk j + 1 uploads); stage
  2 on the device (``reduced``: partition levels and one PCR block) on the main stream once every chunk's
  stage 1 is done; then chunk j's stage 3 and the download of its unknowns on stream j, so the downloads of
  the first chunks overlap stage 3 of the later ones. Nothing on the host waits until the end: the whole solve
  is enqueued at once, and a zero pivot or NaN met on the device is raised after the final sync.
* ``gpu`` with ``copies="ordered"`` (``set_copies``): the same work on three streams instead of one per chunk:
  every chunk's upload in order on one copy stream with an event after each, stage 1 of chunk j on the
  compute stream as soon as chunk j's event fires (so it overlaps the upload of chunk j + 1 and the copy
  engine moves one chunk at a time, at the rate of one large copy), stage 2 there, stage 3 chunk by chunk
  with an event after each, and every download in order on a second copy stream behind its chunk's event.
* ``gpu`` with ``copies="streamed"`` or ``"spike"`` (``_solve_chained``): stage 2 chunk by chunk as the chunks
  arrive, so that after the last upload only the last chunk's part of stage 2, the small top system and the
  first chunk's way back stand before the first download, all on the copy stream (no hand-over between
  streams on that chain). ``streamed`` reduces a chunk through every partition level of its own groups
  (chunks on ``DevicePartition.unit`` edges; the operations of ``gpu``, so its bits); ``spike`` runs one
  kernel per chunk that does stage 1 and solves each 512-sub-system slice's interface block in shared memory
  for its own right-hand side and two spikes, a top system of two rows per slice, and one kernel per chunk
  back (the fastest: ``data/tridiag/h100/streamed/``).

The solution is written over the device copy of ``d`` (it is re-uploaded by every solve), which saves 8
B/unknown of device memory: 32 B/unknown plus the reduced levels (``reduced.device_bytes``), so about 2 x 10^9
unknowns fit on an 80 GB card; a larger system raises ``TridiagMemoryError`` before anything is allocated.

Streams are created once per solver and reused, as an application would; the seed's per-stream creation cost
tau is measured separately (``benchmarks/tridiag_streams.py``) for the Gomez-Luna estimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from . import reduced
from .device_solver import DevicePartition, free_device_bytes
from .device_solver import max_threads as limit
from .host_solver import HostSolver
from .system import (
    check_copies,
    check_ends,
    check_m,
    check_stage2,
    check_streams,
    chunk_rows,
)

STAGES = ("t1_h2d", "t1_comp", "t1_d2h", "t2_host", "t3_h2d", "t3_comp", "t3_d2h")
F8 = 8  # bytes per float64


def max_threads(cp: ModuleType, m: int) -> int:
    """Largest block the compiled kernels accept (registers bound it for large ``m``)."""

    return limit(cp, m)


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


class CudaPartitionSolver:
    """One system resident in pinned host memory, solved end to end (host -> device -> host) on demand."""

    def __init__(
        self,
        cp: ModuleType,
        abcd_host: np.ndarray,
        m: int = 10,
        threads: int = 256,
        stage2: str = "host",
        staged: bool = True,
        slice_size: int = reduced.SLICE,
    ):

        self.cp = cp
        self.m = check_m(m)
        self.stage2 = check_stage2(stage2)
        self.n = int(abcd_host.shape[1])
        free, name = free_device_bytes(cp)
        reduced.check_fits(self.n, self.m, free, device=name, resident=False)  # before allocating anything
        self.host = abcd_host  # (4, n) pinned
        self.x_host = empty_pinned(cp, (self.n,))
        self.dev = cp.empty((4, self.n), dtype=np.float64)
        self.rows = tuple(self.dev[i] for i in range(4))
        self.dp = DevicePartition(
            cp, self.n, self.m, threads, check=False, staged=staged, slice_size=slice_size
        )
        self.p = self.dp.p
        self.threads = self.dp.threads
        self.iface_host: np.ndarray | None = None  # the host stage's pinned buffer, made on first use
        self.host_solver: Any = None
        self.main = cp.cuda.Stream(non_blocking=True)
        self.streams = [cp.cuda.Stream(non_blocking=True) for _ in range(32)]
        self._plans: dict[tuple[int, int, float], list[_Chunk]] = {}
        self.copies = "streams"
        self.ends = 1.0  # set_ends
        self.up = cp.cuda.Stream(non_blocking=True)  # "ordered": every upload, in order
        self.down = cp.cuda.Stream(non_blocking=True)  # "ordered": every download, in order
        self._uploaded = [cp.cuda.Event(disable_timing=True) for _ in range(32)]  # made once, re-recorded
        self._solved = [cp.cuda.Event(disable_timing=True) for _ in range(32)]
        self._downloaded = cp.cuda.Event(disable_timing=True)
        self._reduced = cp.cuda.Event(disable_timing=True)
        self._flag_reset = cp.cuda.Event(disable_timing=True)  # _solve_chained: the flag's reset and copy,
        self._flag_fetched = cp.cuda.Event(disable_timing=True)  # both off the copies' stream
        self.trace = False  # _solve_chained: also the times of the critical chain's steps (at_*)

    def set_threads(self, threads: int) -> None:
        """Threads per block of the top-level kernels (at most the compiled kernels' limit for this ``m``)."""
        self.dp.set_threads(threads)
        self.threads = self.dp.threads

    def set_stage2(self, stage2: str) -> None:
        self.stage2 = check_stage2(stage2)

    def set_copies(self, copies: str) -> None:
        """``streams`` (one stream per chunk), ``ordered`` (one upload stream, one download stream; only with
        stage 2 on the device), ``streamed`` (``ordered``, with stage 2 reduced chunk by chunk as the chunks
        arrive) or ``spike`` (``ordered``, with stage 2 by SPIKE slices): see ``_solve_ordered``."""
        self.copies = check_copies(copies)

    def _host_stage(self) -> tuple[np.ndarray, Any]:
        if self.iface_host is None:
            self.iface_host = empty_pinned(self.cp, (4, 2 * self.p))
            self.host_solver = HostSolver(2 * self.p)
        return self.iface_host, self.host_solver

    def set_ends(self, ends: float) -> None:
        """The first and the last chunk's share of an inner chunk in the ``streamed`` and ``spike``
        pipelines (``system.chunk_bounds``; 1: equal chunks, the default)."""
        self.ends = check_ends(ends)

    def _plan(self, streams: int, unit: int = 1, ends: float = 1.0) -> list[_Chunk]:
        key = (streams, unit, ends)
        if key not in self._plans:
            self._plans[key] = [_Chunk(*c) for c in chunk_rows(self.n, self.m, streams, unit, ends)]
        return self._plans[key]

    def solve(self, streams: int = 1, detail: bool = False) -> dict[str, float]:
        """Solve once; the solution lands in ``self.x_host``. Returns milliseconds from CUDA events.

        Always: ``total`` and the spans ``stage1``, ``stage2`` (also under its old name ``host``) and
        ``stage3``. With ``detail`` (one stream only, so the operations are serial): the seven stage times of
        ``STAGES``, which add up to ``total`` (with ``stage2="gpu"``, ``t1_d2h`` and ``t3_h2d`` are 0: the
        interface system never leaves the device, and ``t2_host`` is the device's stage 2).
        """
        cp, dp = self.cp, self.dp
        rt = cp.cuda.runtime
        streams = check_streams(streams)
        if self.copies == "streamed" and self.stage2 == "gpu" and not detail:
            return self._solve_ordered(self._plan(streams, self.dp.unit, self.ends), "streamed")
        if self.copies == "spike" and self.stage2 == "gpu" and not detail:
            return self._solve_ordered(self._plan(streams, self.dp.slice_size, self.ends), "spike")
        chunks = self._plan(streams)
        if self.copies == "ordered" and self.stage2 == "gpu" and not detail:
            return self._solve_ordered(chunks)
        if detail and len(chunks) != 1:
            raise ValueError("per-stage detail needs one stream (with more the stages overlap)")
        on_host = self.stage2 == "host"
        if on_host:
            iface_host, host_solver = self._host_stage()
        h2d, d2h = rt.memcpyHostToDevice, rt.memcpyDeviceToHost
        n8, ld8 = self.n * F8, 2 * self.p * F8
        host_ptr, dev_ptr = self.host.ctypes.data, self.dev.data.ptr
        xd_ptr = self.dev.data.ptr + 3 * n8  # x is written over the device's d
        lv_ptr = dp.levels[0].data.ptr
        ev = {k: cp.cuda.Event() for k in ("start", "s1", "s2", "stop")}
        marks: dict[str, Any] = {}

        def mark(name: str, stream: Any) -> None:
            if detail:
                marks[name] = cp.cuda.Event()
                marks[name].record(stream)

        def join(stream: Any) -> None:
            done = cp.cuda.Event(disable_timing=True)
            done.record(stream)
            self.main.wait_event(done)

        ev["start"].record(self.main)
        dp.reset_flag(self.main)
        flag_reset = cp.cuda.Event(disable_timing=True)
        flag_reset.record(self.main)
        used = self.streams[: len(chunks)]
        for st in used:
            st.wait_event(flag_reset)
        # stage 1: upload the chunk's four rows (one 2-D copy), reduce (host stage: download the result)
        for ch, st in zip(chunks, used, strict=True):
            off = ch.r0 * F8
            rt.memcpy2DAsync(dev_ptr + off, n8, host_ptr + off, n8, (ch.r1 - ch.r0) * F8, 4, h2d, st.ptr)
            mark("h2d1", st)
            dp.stage1(self.rows, ch.s, ch.e, st)
            mark("k1", st)
            if on_host:
                off = 2 * ch.s * F8
                ih = iface_host.ctypes.data + off
                rt.memcpy2DAsync(ih, ld8, lv_ptr + off, ld8, 2 * (ch.e - ch.s) * F8, 4, d2h, st.ptr)
            join(st)
        mark("d2h1", self.main)
        if on_host:  # the seed's host stage: wait for the interface rows, solve them on the host
            dp.fetch_flag(self.main)
            ev["s1"].record(self.main)
            ev["s1"].synchronize()
            dp.raise_flag()
            host_solver.solve(iface_host)
        else:
            ev["s1"].record(self.main)
            dp.stage2(self.main)
        ev["s2"].record(self.main)
        # stage 3: (host stage: upload the chunk's z,) solve the interiors, download the chunk's unknowns
        for ch, st in zip(chunks, used, strict=True):
            st.wait_event(ev["s2"])
            if on_host:
                off = 2 * ch.s * F8
                rt.memcpyAsync(
                    dp.z.data.ptr + off, iface_host[3].ctypes.data + off, 2 * (ch.e - ch.s) * F8, h2d, st.ptr
                )
            mark("h2d3", st)
            dp.stage3(self.rows, ch.s, ch.e, self.rows[3], st)
            mark("k3", st)
            off = ch.r0 * F8
            rt.memcpyAsync(self.x_host.ctypes.data + off, xd_ptr + off, (ch.r1 - ch.r0) * F8, d2h, st.ptr)
            join(st)
        if not on_host:
            dp.fetch_flag(self.main)
        ev["stop"].record(self.main)
        ev["stop"].synchronize()
        if not on_host:
            dp.raise_flag()
        el = cp.cuda.get_elapsed_time
        out = {
            "total": el(ev["start"], ev["stop"]),
            "stage1": el(ev["start"], ev["s1"]),
            "stage2": el(ev["s1"], ev["s2"]),
            "stage3": el(ev["s2"], ev["stop"]),
        }
        out["host"] = out["stage2"]  # the name of the stage-2 span before stage 2 could run on the device
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

    def _solve_ordered(self, chunks: list[_Chunk], stage2: str = "levels") -> dict[str, float]:
        """Stage 2 on the device, uploads in order on ``up``, kernels on ``main``, downloads in order on
        ``down``; an event per chunk hands each chunk on. Same spans as ``solve``.

        ``stage2``: ``levels`` (every level of stage 2 after the last chunk's stage 1), ``streamed`` or
        ``spike`` (``_solve_chained``)."""
        if stage2 != "levels":
            return self._solve_chained(chunks, spike=stage2 == "spike")
        cp, dp = self.cp, self.dp
        rt = cp.cuda.runtime
        h2d, d2h = rt.memcpyHostToDevice, rt.memcpyDeviceToHost
        n8 = self.n * F8
        host_ptr, dev_ptr = self.host.ctypes.data, self.dev.data.ptr
        xd_ptr = dev_ptr + 3 * n8  # x is written over the device's d
        ev = {k: cp.cuda.Event() for k in ("start", "s1", "s2", "stop")}
        ev["start"].record(self.main)
        dp.reset_flag(self.main)
        self.up.wait_event(ev["start"])
        for ch, uploaded in zip(chunks, self._uploaded, strict=False):
            off = ch.r0 * F8
            rt.memcpy2DAsync(dev_ptr + off, n8, host_ptr + off, n8, (ch.r1 - ch.r0) * F8, 4, h2d, self.up.ptr)
            uploaded.record(self.up)
            self.main.wait_event(uploaded)
            dp.stage1(self.rows, ch.s, ch.e, self.main)
        ev["s1"].record(self.main)
        dp.stage2(self.main)
        ev["s2"].record(self.main)
        for ch, solved in zip(chunks, self._solved, strict=False):
            dp.stage3(self.rows, ch.s, ch.e, self.rows[3], self.main)
            solved.record(self.main)
            self.down.wait_event(solved)
            off = ch.r0 * F8
            rt.memcpyAsync(
                self.x_host.ctypes.data + off, xd_ptr + off, (ch.r1 - ch.r0) * F8, d2h, self.down.ptr
            )
        self._downloaded.record(self.down)
        self.main.wait_event(self._downloaded)
        return self._finish(ev)

    def _solve_chained(self, chunks: list[_Chunk], spike: bool) -> dict[str, float]:
        """Stage 2 chunk by chunk, with no hand-over between streams from the last upload to the first
        download: every copy and the critical chain (the last chunk's reduction, the top solve, the first
        chunk's way back) on ``up``, the other chunks' reductions and ways back on ``main``.

        ``spike``: a chunk's reduction is ``spike_reduce`` (stage 1 and its slices' spikes, one kernel), the
        top solve ``spike_top``, the way back ``spike_back`` (the slices' interface values and stage 3, one
        kernel). Else (``streamed``): ``stage1`` and ``reduce`` (every level of the chunk's groups),
        ``solve_top`` (the PCR block), ``back`` and ``stage3``: the plain pipeline's operations, so its bits.
        """
        cp, dp, up, side = self.cp, self.dp, self.up, self.main
        rt = cp.cuda.runtime
        h2d, d2h = rt.memcpyHostToDevice, rt.memcpyDeviceToHost
        n8 = self.n * F8
        host_ptr, dev_ptr = self.host.ctypes.data, self.dev.data.ptr
        xd_ptr = dev_ptr + 3 * n8  # x is written over the device's d

        def reduce(ch: _Chunk, stream: Any) -> None:
            if spike:
                dp.spike_reduce(self.rows, ch.s, ch.e, stream)
            else:
                dp.stage1(self.rows, ch.s, ch.e, stream)
                dp.reduce(ch.s, ch.e, stream)

        def back(ch: _Chunk, stream: Any) -> None:
            if spike:
                dp.spike_back(self.rows, ch.s, ch.e, self.rows[3], stream)
            else:
                dp.back(ch.s, ch.e, stream)
                dp.stage3(self.rows, ch.s, ch.e, self.rows[3], stream)

        def download(ch: _Chunk) -> None:
            off = ch.r0 * F8
            rt.memcpyAsync(self.x_host.ctypes.data + off, xd_ptr + off, (ch.r1 - ch.r0) * F8, d2h, up.ptr)

        ev = {k: cp.cuda.Event() for k in ("start", "s1", "s2", "stop")}
        ev["start"].record(up)
        # the error flag's reset and its copy to the host run on ``side``, so that neither sits between the
        # copies on ``up``: the reset before any kernel (``up``'s first waits for it), the copy once the last
        # kernel that can set the flag (the top solve) is done, beside the first chunk's way back
        side.wait_event(ev["start"])
        dp.reset_flag(side)
        self._flag_reset.record(side)
        last = chunks[-1]
        marks: dict[str, Any] = {}

        def mark(name: str) -> None:  # the critical chain's steps, on ``up`` (with ``trace``)
            if self.trace:
                marks[name] = cp.cuda.Event()
                marks[name].record(up)

        for ch, uploaded in zip(chunks, self._uploaded, strict=False):
            off = ch.r0 * F8
            rt.memcpy2DAsync(dev_ptr + off, n8, host_ptr + off, n8, (ch.r1 - ch.r0) * F8, 4, h2d, up.ptr)
            if ch is not last:
                uploaded.record(up)
                side.wait_event(uploaded)
                reduce(ch, side)
        mark("uploaded")
        self._reduced.record(side)  # every chunk but the last reduced
        up.wait_event(self._flag_reset)
        reduce(last, up)
        mark("last_reduced")
        up.wait_event(self._reduced)
        ev["s1"].record(up)
        dp.spike_top(up) if spike else dp.solve_top(up)
        ev["s2"].record(up)
        side.wait_event(ev["s2"])
        dp.fetch_flag(side)  # no way back sets the flag
        self._flag_fetched.record(side)
        first, *later = chunks
        back(first, up)
        mark("first_back")
        download(first)
        mark("first_down")
        for ch, solved in zip(later, self._solved, strict=False):
            back(ch, side)
            solved.record(side)
            up.wait_event(solved)
            download(ch)
        up.wait_event(self._flag_fetched)
        out = self._finish(ev, stream=up, fetch=False)
        out.update({f"at_{k}": self.cp.cuda.get_elapsed_time(ev["start"], e) for k, e in marks.items()})
        return out

    def _finish(self, ev: dict[str, Any], stream: Any = None, fetch: bool = True) -> dict[str, float]:
        """Fetch the error flag (unless the caller has), record ``stop`` on ``stream`` (default ``main``),
        wait, raise; the spans."""
        stream = self.main if stream is None else stream
        if fetch:
            self.dp.fetch_flag(stream)
        ev["stop"].record(stream)
        ev["stop"].synchronize()
        self.dp.raise_flag()
        el = self.cp.cuda.get_elapsed_time
        out = {
            "total": el(ev["start"], ev["stop"]),
            "stage1": el(ev["start"], ev["s1"]),
            "stage2": el(ev["s1"], ev["s2"]),
            "stage3": el(ev["s2"], ev["stop"]),
        }
        out["host"] = out["stage2"]
        return out
