"""Stage 2's host solver: ``host_thomas.c`` built once with the system C compiler, called through ctypes.

Falls back to LAPACK ``dgtsv`` (one core, through scipy) where no C compiler or OpenMP is available;
``name()`` says which one runs, and the workload records it with every timing.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import subprocess
import tempfile
from importlib.resources import as_file, files
from pathlib import Path

import numpy as np

from .partition import stage2
from .system import ZeroPivotError

# Package data: a plain file in a wheel or a checkout; as_file makes one where a package lives in a zip.
SOURCE = files("launchtune.kernels.tridiag").joinpath("host_thomas.c")


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "launchtune"


@functools.cache
def _library() -> ctypes.CDLL | None:
    # Keep OpenMP's idle threads spinning between solves rather than sleeping: on the lent H100 VM the host
    # stage was bimodal (0.5 ms or 15 ms at 10^6 unknowns, 16 threads), which looks like threads woken late or
    # preempted (not yet confirmed). Only takes effect if libgomp is loaded here first; a user's setting wins.
    # Spinning threads would starve the caller on a small machine, so only where half the cores stay free.
    if _cores() >= 8:
        os.environ.setdefault("GOMP_SPINCOUNT", "100000000")
    src = SOURCE.read_bytes()
    tag = hashlib.sha256(src).hexdigest()[:16]
    for directory in (_cache_dir(), Path(tempfile.gettempdir()) / "launchtune"):
        lib = directory / f"host_thomas_{tag}.so"
        try:
            if not lib.exists():
                directory.mkdir(parents=True, exist_ok=True)
                tmp = lib.with_suffix(f".{os.getpid()}.tmp")
                cc = os.environ.get("CC", "cc")
                with as_file(SOURCE) as source:
                    subprocess.run(
                        [cc, "-O3", "-fopenmp", "-shared", "-fPIC", "-o", str(tmp), str(source)],
                        check=True,
                        capture_output=True,
                        timeout=120,
                    )
                os.replace(tmp, lib)  # atomic: a concurrent worker never loads a half-written library
            dll = ctypes.CDLL(str(lib))
        except (OSError, subprocess.SubprocessError):
            continue
        fn = dll.tridiag_solve
        fn.restype = ctypes.c_long
        fn.argtypes = [ctypes.c_long, *([ctypes.c_void_p] * 5), ctypes.c_int]
        return dll
    return None


def name() -> str:
    return "thomas-omp" if _library() is not None else "lapack-dgtsv"


def default_threads() -> int:
    """``LAUNCHTUNE_HOST_THREADS``, else half the usable cores (at most 16): the other half stays free for the
    Python thread and the CUDA driver, so no OpenMP thread waits for a preempted one at the barrier."""
    env = os.environ.get("LAUNCHTUNE_HOST_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(16, _cores() // 2))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class HostSolver:
    """Solves the ``(4, N)`` interface buffer (sub, diag, super, rhs) in place; the answer lands in row 3."""

    def __init__(self, size: int, threads: int | None = None):
        self.lib = _library()
        self.threads = threads or default_threads()
        self.work = np.empty(size) if self.lib is not None else np.empty(0)

    @property
    def name(self) -> str:
        return "thomas-omp" if self.lib is not None else "lapack-dgtsv"

    def solve(self, iface: np.ndarray) -> np.ndarray:
        if self.lib is None:
            return stage2(iface)
        n = iface.shape[1]
        if not (iface.flags.c_contiguous and iface.dtype == np.float64 and self.work.size >= n):
            raise ValueError("interface buffer must be C-contiguous float64 (4, N) within the work size")
        ptr = iface.ctypes.data
        status = self.lib.tridiag_solve(
            n, ptr, ptr + 8 * n, ptr + 16 * n, ptr + 24 * n, self.work.ctypes.data, self.threads
        )
        if status:
            where = f"row {abs(status) - 1}" if status > 0 else f"the threads' {2 * self.threads}-row system"
            raise ZeroPivotError(
                f"zero pivot in the interface system ({where}): the matrix is singular or not "
                "diagonally dominant"
            )
        return iface[3]
