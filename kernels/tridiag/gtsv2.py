"""cuSPARSE ``gtsv2`` as the GPU baseline, with the same transfers as the partition solver.

CuPy 14 has no ``cupyx.cusparse.gtsv2`` wrapper. Its low-level bindings in
``cupy_backends.cuda.libs.cusparse`` carry ``dgtsv2``/``dgtsv2_nopivot`` and their buffer-size queries in some
versions; we use those where present and otherwise call ``libcusparse`` through ctypes. ``GtsvBaseline.via``
says which path ran.

Size limit. ``cusparseDgtsv2_bufferSizeExt`` takes ``m`` as a C ``int`` and answers a ``size_t``; the cuSPARSE
documentation names no upper bound on ``m`` besides that. In the first H200 run (CUDA 13.2, CuPy 14.2.0) the
query answered a size that does not fit a signed 64-bit integer at m = 10^8 (``cp.empty`` raised
``OverflowError: Python int too large to convert to C ssize_t``), while 8 x 10^7 worked on both the H100
and the H200. A value of 2^63 or more is what a negative 32-bit size sign-extended to ``size_t`` looks like,
so the likely cause is a 32-bit overflow of the workspace size inside the library (the exact value was not
logged).
``checked_buffer_size`` therefore refuses any answer that is negative as a signed value or over
``MAX_BYTES_PER_ROW`` bytes per row, with ``GtsvLimitError`` naming the size and cuSPARSE's limit, instead of
handing it to the allocator; ``GtsvBaseline.buffer_bytes`` keeps the accepted size for the record.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from types import ModuleType
from typing import Any

import numpy as np

from . import cuda_solver

F8 = 8
INT_MAX = 2**31 - 1  # cuSPARSE's m, n and ldb are C ints
#: gtsv2's workspace is O(m), a few values per row (``buffer_bytes`` records the real figure on the next
#: GPU run). An answer over this many bytes per row (plus ``SLACK_BYTES``) is not a workspace size.
MAX_BYTES_PER_ROW = 1024
SLACK_BYTES = 64 << 20


class GtsvLimitError(RuntimeError):
    """cuSPARSE gtsv2 cannot be run at this size: ``m`` over a C int, or a workspace query that overflowed."""


def checked_buffer_size(
    nbytes: int, m: int, nrhs: int = 1, what: str = "cusparseDgtsv2_bufferSizeExt"
) -> int:
    """``nbytes`` if it is a plausible gtsv2 workspace for an ``m`` x ``m`` system, else ``GtsvLimitError``.

    Plausible: 0 <= nbytes <= ``SLACK_BYTES`` + ``MAX_BYTES_PER_ROW`` x m x nrhs. A value of 2^63 or more is
    read back as a signed 64-bit number; between -2^31 and 0 it is a negative 32-bit size sign-extended to
    ``size_t``, and the message says so. (A size that wrapped to a small positive value cannot be told from a
    real one here; the residual of the gtsv2 solution, which the benchmark records, shows that.)
    """
    nbytes = int(nbytes)
    bound = SLACK_BYTES + MAX_BYTES_PER_ROW * int(m) * max(int(nrhs), 1)
    if 0 <= nbytes <= bound:
        return nbytes
    signed = nbytes - (1 << 64) if nbytes >= (1 << 63) else nbytes
    if -(1 << 31) <= signed < 0:
        why = (
            f"read as a signed value that is {signed:,}: a negative 32-bit size sign-extended to size_t, "
            "so the workspace size overflowed 32 bits inside cuSPARSE"
        )
    elif signed < 0:
        why = f"read as a signed value that is {signed:,}: not a size (an uninitialised or wrapped value)"
    else:
        why = f"over the plausible bound of {bound:,} bytes ({MAX_BYTES_PER_ROW} B/row + 64 MiB)"
    raise GtsvLimitError(
        f"{what} answered {nbytes:,} bytes for m = {m:,} (nrhs = {nrhs}), {why}. cuSPARSE's gtsv2 cannot "
        f"solve a system of {m:,} unknowns with this library (sizes up to 8e7 worked on CUDA 13.2; 1e8 did "
        "not); the partition solver has no such limit."
    )


def check_rows(m: int, nrhs: int = 1) -> None:
    """``GtsvLimitError`` where ``m`` (or ``ldb`` x ``nrhs``) does not fit cuSPARSE's C ``int`` arguments."""
    if m > INT_MAX or m * max(nrhs, 1) > INT_MAX:
        raise GtsvLimitError(
            f"gtsv2 takes m and ldb as C ints (at most {INT_MAX:,}); m = {m:,} with nrhs = {nrhs} "
            "does not fit"
        )


def _binding(cp: ModuleType) -> tuple[Any, tuple[Any, Any, Any, Any]] | None:
    """(module, (buffer_size, solve, buffer_size_nopivot, solve_nopivot)) from CuPy's cuSPARSE bindings."""
    try:
        from cupy_backends.cuda.libs import cusparse as cs
    except Exception:
        return None
    for size_name, solve_name in (("dgtsv2_bufferSizeExt", "dgtsv2"), ("dgtsv2_buffer_size_ext", "dgtsv2")):
        np_size = size_name.replace("dgtsv2", "dgtsv2_nopivot")
        fns = [getattr(cs, name, None) for name in (size_name, solve_name, np_size, "dgtsv2_nopivot")]
        if all(fns):
            return cs, tuple(fns)  # type: ignore[return-value]
    return None


def _libcusparse() -> ctypes.CDLL:
    names = [ctypes.util.find_library("cusparse")]
    for pattern in (
        "/usr/local/cuda*/lib64/libcusparse.so*",
        "/usr/local/cuda*/targets/*/lib/libcusparse.so*",
        "/usr/lib/x86_64-linux-gnu/libcusparse.so*",
    ):
        names += sorted(glob.glob(pattern))
    try:  # pip-installed CUDA libraries (nvidia-cusparse-*)
        import nvidia

        for root in nvidia.__path__:
            names += sorted(glob.glob(os.path.join(root, "**", "libcusparse.so*"), recursive=True))
    except Exception:
        pass
    names += ["libcusparse.so.13", "libcusparse.so.12", "libcusparse.so"]
    for name in names:
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise RuntimeError("libcusparse not found: cannot run the cuSPARSE gtsv2 baseline")


class GtsvBaseline:
    """Upload ``(4, n)``, solve with ``cusparseDgtsv2`` (or ``_nopivot``) in place on ``d``, get ``x``."""

    def __init__(self, cp: ModuleType, abcd_host: np.ndarray, pivot: bool = True):
        if abcd_host[0, 0] != 0.0 or abcd_host[2, -1] != 0.0:
            raise ValueError("gtsv2 needs a[0] = 0 and c[n-1] = 0")
        self.cp, self.host, self.pivot = cp, abcd_host, pivot
        self.n = int(abcd_host.shape[1])
        check_rows(self.n)  # before allocating anything
        self.buffer_bytes = 0
        self.dev = cp.empty((4, self.n), dtype=np.float64)
        self.x_host = np.empty(0)

        self.x_host = cuda_solver.empty_pinned(cp, (self.n,))
        self.stream = cp.cuda.Stream(non_blocking=True)
        ptrs = [self.dev.data.ptr + i * self.n * F8 for i in range(4)]
        self._args = (self.n, 1, *ptrs, self.n)
        self.via = ""
        found = _binding(cp)
        if found is not None:
            try:
                self._setup_binding(cp, *found)
            except GtsvLimitError:  # the library's answer, not the binding's fault: ctypes would get the same
                raise
            except Exception as exc:  # a binding whose signature differs: fall back to ctypes, say so
                self.via = f"ctypes libcusparse (bindings failed: {type(exc).__name__})"
        if not self.via.startswith("cupy_backends"):
            self._setup_ctypes()
            self.via = self.via or "ctypes libcusparse"

    def _setup_binding(self, cp: ModuleType, cs: Any, fns: tuple[Any, Any, Any, Any]) -> None:
        # CuPy's binding functions set the handle's stream to CuPy's *current* stream on every call, so the
        # call must run inside ``with self.stream`` (else the solve races the copy).
        size_fn, solve_fn = (fns[0], fns[1]) if self.pivot else (fns[2], fns[3])
        handle = cp.cuda.device.get_cusparse_handle()
        with self.stream:
            cs.setStream(handle, self.stream.ptr)
            nbytes = checked_buffer_size(size_fn(handle, *self._args), self.n, what=self._size_name)
        self.buffer = cp.empty(max(nbytes, 1), dtype=np.uint8)
        self.buffer_bytes = nbytes

        def run() -> None:
            with self.stream:
                solve_fn(handle, *self._args, self.buffer.data.ptr)

        self._solve = run
        self._solve()  # one trial call, so a bad binding shows here and not in the timed loop
        self.stream.synchronize()
        self.via = "cupy_backends.cuda.libs.cusparse"

    def _setup_ctypes(self) -> None:
        lib = _libcusparse()
        handle = ctypes.c_void_p()
        self._check(lib.cusparseCreate(ctypes.byref(handle)), "cusparseCreate")
        self._check(lib.cusparseSetStream(handle, ctypes.c_void_p(self.stream.ptr)), "cusparseSetStream")
        stem = "cusparseDgtsv2" if self.pivot else "cusparseDgtsv2_nopivot"
        size_fn, solve_fn = getattr(lib, stem + "_bufferSizeExt"), getattr(lib, stem)
        n_, nrhs, dl, d, du, b, ldb = self._args
        cargs = (
            handle,
            ctypes.c_int(n_),
            ctypes.c_int(nrhs),
            *(ctypes.c_void_p(x) for x in (dl, d, du, b)),
            ctypes.c_int(ldb),
        )
        size = ctypes.c_size_t()
        try:
            self._check(size_fn(*cargs, ctypes.byref(size)), self._size_name)
            nbytes = checked_buffer_size(size.value, self.n, what=self._size_name)
        except Exception:
            lib.cusparseDestroy(handle)
            raise
        self.buffer = self.cp.empty(max(nbytes, 1), dtype=np.uint8)
        self.buffer_bytes = nbytes
        self._lib_handle = handle
        buf = ctypes.c_void_p(self.buffer.data.ptr)
        self._solve = lambda: self._check(solve_fn(*cargs, buf), stem)

    @property
    def _size_name(self) -> str:
        return "cusparseDgtsv2" + ("" if self.pivot else "_nopivot") + "_bufferSizeExt"

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} failed with cuSPARSE status {status}")

    def solve(self) -> float:
        """One end-to-end solve (H2D of the 4 rows, gtsv2, D2H of x); milliseconds by CUDA events."""
        cp, rt = self.cp, self.cp.cuda.runtime
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record(self.stream)
        rt.memcpyAsync(
            self.dev.data.ptr, self.host.ctypes.data, 4 * self.n * F8, rt.memcpyHostToDevice, self.stream.ptr
        )
        self._solve()
        rt.memcpyAsync(
            self.x_host.ctypes.data,
            self.dev.data.ptr + 3 * self.n * F8,
            self.n * F8,
            rt.memcpyDeviceToHost,
            self.stream.ptr,
        )
        stop.record(self.stream)
        stop.synchronize()
        return float(cp.cuda.get_elapsed_time(start, stop))


class DeviceGtsv:
    """``gtsv2`` / ``gtsv2_nopivot`` on rows already on the device (the device-resident comparison, and the
    cuSPARSE alternative for stage 2): ``run()`` solves in place on ``b`` (``b`` becomes ``x``) on
    ``stream``, enqueue only. ``dl[0]`` and ``du[n-1]`` must be 0 (cuSPARSE reads them)."""

    def __init__(
        self, cp: ModuleType, dl: Any, d: Any, du: Any, b: Any, pivot: bool = True, stream: Any = None
    ):
        self.cp, self.pivot = cp, pivot
        self.n = int(d.shape[0])
        check_rows(self.n)
        self.stream = stream if stream is not None else cp.cuda.Stream(non_blocking=True)
        self._keep = (dl, d, du, b)
        self._args = (self.n, 1, dl.data.ptr, d.data.ptr, du.data.ptr, b.data.ptr, self.n)
        stem = "cusparseDgtsv2" + ("" if pivot else "_nopivot")
        found = _binding(cp)
        if found is not None:
            cs, fns = found
            size_fn, solve_fn = (fns[0], fns[1]) if pivot else (fns[2], fns[3])
            handle = cp.cuda.device.get_cusparse_handle()
            with self.stream:
                cs.setStream(handle, self.stream.ptr)
                nbytes = checked_buffer_size(
                    size_fn(handle, *self._args), self.n, what=stem + "_bufferSizeExt"
                )
            self.buffer = cp.empty(max(nbytes, 1), dtype=np.uint8)

            def run() -> None:
                with self.stream:  # the binding sets the handle's stream to CuPy's current one
                    solve_fn(handle, *self._args, self.buffer.data.ptr)

            self.via = "cupy_backends.cuda.libs.cusparse"
        else:
            lib = _libcusparse()
            h = ctypes.c_void_p()
            GtsvBaseline._check(lib.cusparseCreate(ctypes.byref(h)), "cusparseCreate")
            GtsvBaseline._check(
                lib.cusparseSetStream(h, ctypes.c_void_p(self.stream.ptr)), "cusparseSetStream"
            )
            n_, nrhs, *ptrs, ldb = self._args
            cargs = (
                h,
                ctypes.c_int(n_),
                ctypes.c_int(nrhs),
                *(ctypes.c_void_p(p) for p in ptrs),
                ctypes.c_int(ldb),
            )
            size = ctypes.c_size_t()
            GtsvBaseline._check(getattr(lib, stem + "_bufferSizeExt")(*cargs, ctypes.byref(size)), stem)
            nbytes = checked_buffer_size(size.value, self.n, what=stem + "_bufferSizeExt")
            self.buffer = cp.empty(max(nbytes, 1), dtype=np.uint8)
            buf, solve_c = ctypes.c_void_p(self.buffer.data.ptr), getattr(lib, stem)

            def run() -> None:
                GtsvBaseline._check(solve_c(*cargs, buf), stem)

            self.via = "ctypes libcusparse"
        self.buffer_bytes = nbytes
        self.run = run
