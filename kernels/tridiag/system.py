"""Tridiagonal systems: the storage convention, test systems, residuals, input checks and chunking.

Convention (shared by every solver here): a system of ``n`` unknowns is one ``(4, n)`` float64 array whose
rows are the sub-diagonal ``a``, the diagonal ``b``, the super-diagonal ``c`` and the right-hand side ``d``;
row ``i`` reads ``a[i] x[i-1] + b[i] x[i] + c[i] x[i+1] = d[i]``. ``a[0]`` and ``c[n-1]`` are ignored. One
array rather than four so that a chunk of all four rows moves host-to-device in one 2-D copy.
"""

from __future__ import annotations

import numpy as np

STREAM_CHOICES = (1, 2, 4, 8, 16, 32)
STAGE2_CHOICES = ("host", "gpu")  # where the interface system is solved: the host (seed) or the device
# how the chunks' copies are issued with stage 2 on the device: one stream per chunk (copies and kernels on
# it), or "ordered": every upload in order on one copy stream, every download on another, kernels on a third
COPY_CHOICES = ("streams", "ordered", "streamed", "spike")
MIN_M = 3  # a sub-system needs at least one interior row between its two interface rows
# The kernels index rows with 32-bit ints; the system alone is then 64 GiB (4 rows of float64), more than a
# host or card of ours holds, so a larger size could only fail later, in an allocation.
MAX_UNKNOWNS = 2**31 - 1


class TridiagError(ValueError):
    """Bad input to a tridiagonal solver: non-positive size, bad stream count, bad sub-system size."""


class ZeroPivotError(ArithmeticError):
    """Elimination met an exact zero pivot: singular, or unsafe for elimination without pivoting."""


def parse_size(size: int | str | tuple[int, ...]) -> int:
    """``1000``, ``"1000"``, ``"1e6"``, ``"2.5e7"`` or ``(1000,)`` -> a positive int number of unknowns."""
    if isinstance(size, tuple | list):
        if len(size) != 1:
            raise TridiagError(
                f"size {size!r}: a tridiagonal system has one dimension (the number of unknowns)"
            )
        size = size[0]
    try:
        if isinstance(size, str) and not size.isascii():  # float() reads other scripts' digits too
            raise ValueError(size)
        value = float(size) if isinstance(size, str) else size
        if isinstance(value, bool):
            raise TypeError(size)
        n = int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite size
        raise TridiagError(f"size {size!r} is not a number of unknowns") from None
    if n != value or n <= 0:
        raise TridiagError(f"size {size!r} must be a positive whole number of unknowns")
    if n > MAX_UNKNOWNS:
        raise TridiagError(f"size {size!r}: at most {MAX_UNKNOWNS:,} unknowns (32-bit row indices)")
    return n


def check_streams(streams: int) -> int:
    if isinstance(streams, bool) or int(streams) != streams or int(streams) not in STREAM_CHOICES:
        raise TridiagError(
            f"streams={streams!r} must be a power of two from 1 to 32 ({', '.join(map(str, STREAM_CHOICES))})"
        )
    return int(streams)


def check_m(m: int) -> int:
    if isinstance(m, bool) or int(m) != m or not MIN_M <= int(m) <= 64:
        raise TridiagError(f"sub-system size m={m!r} must be a whole number from {MIN_M} to 64")
    return int(m)


def check_stage2(stage2: str) -> str:
    if stage2 not in STAGE2_CHOICES:
        raise TridiagError(f"stage2={stage2!r} must be one of {', '.join(STAGE2_CHOICES)}")
    return stage2


def check_copies(copies: str) -> str:
    if copies not in COPY_CHOICES:
        raise TridiagError(f"copies={copies!r} must be one of {', '.join(COPY_CHOICES)}")
    return copies


def check_ends(ends: float) -> float:
    """The first and last chunk's share of an inner chunk: in (0, 1] (``chunk_bounds``)."""
    if not 0.0 < ends <= 1.0:
        raise TridiagError(f"chunk ends={ends!r} must be in (0, 1]: the end chunks' share of an inner chunk")
    return float(ends)


def check_system(abcd: np.ndarray) -> np.ndarray:
    """The ``(4, n)`` float64 convention, every entry finite (``a[0]``, ``c[n-1]`` ignored): else one line."""
    if not isinstance(abcd, np.ndarray) or abcd.ndim != 2 or abcd.shape[0] != 4 or abcd.shape[1] < 1:
        shape = getattr(abcd, "shape", type(abcd).__name__)
        raise TridiagError(f"a system is one (4, n) array of rows a, b, c, d with n >= 1, not {shape}")
    if abcd.dtype != np.float64:
        raise TridiagError(f"the system must be float64, not {abcd.dtype}")
    n = abcd.shape[1]
    for name, row, lo, hi in (("a", 0, 1, n), ("b", 1, 0, n), ("c", 2, 0, n - 1), ("d", 3, 0, n)):
        bad = ~np.isfinite(abcd[row, lo:hi])
        if bad.any():
            raise TridiagError(f"NaN or Inf in {name}[{lo + int(np.argmax(bad))}]")
    return abcd


def check_rows(a, b, c, d) -> int:  # noqa: ANN001 - numpy or CuPy arrays alike
    """Four 1-D rows of one length n >= 1: n, else a ``TridiagError`` naming the lengths."""
    lengths = []
    for name, row in zip("abcd", (a, b, c, d), strict=True):
        if getattr(row, "ndim", None) != 1:
            raise TridiagError(f"{name} must be a 1-D array, not of shape {getattr(row, 'shape', None)}")
        if row.dtype != np.float64:
            raise TridiagError(f"{name} must be float64, not {row.dtype}")
        lengths.append(int(row.shape[0]))
    if len(set(lengths)) != 1:
        raise TridiagError(
            "mismatched lengths: a, b, c, d have " + ", ".join(map(str, lengths)) + " entries (need one n)"
        )
    if lengths[0] < 1:
        raise TridiagError("empty system: n must be at least 1")
    return lengths[0]


def num_blocks(n: int, m: int) -> int:
    """Sub-systems of ``m`` rows covering ``n`` unknowns; the last is padded with identity rows."""
    return -(-n // m)


def chunk_bounds(blocks: int, streams: int, unit: int = 1, ends: float = 1.0) -> list[tuple[int, int]]:
    """Contiguous ranges of sub-systems, one per stream; every inner edge a multiple of ``unit`` (so fewer
    chunks where ``blocks`` holds fewer units); empty ranges are dropped (n small).

    ``ends`` (0 < ends <= 1) is the share of an inner chunk the first and the last chunk get (with 3 chunks or
    more): the SPIKE pipeline can start nothing before the first chunk is up and waits for the last chunk's
    reduction before the top solve, so small end chunks shorten what the copies cannot hide. 1: equal chunks.
    """
    if unit < 1:
        raise TridiagError(f"chunk unit={unit} must be at least 1")
    check_ends(ends)
    units = -(-blocks // unit)
    if streams < 3 or ends == 1.0:
        cuts = [j * units / streams for j in range(streams + 1)]
    else:  # inner chunk j (1 <= j <= streams - 2) ends at (ends + j) / (2 ends + streams - 2) of the units
        total = 2 * ends + streams - 2
        cuts = [0.0] + [(ends + j) * units / total for j in range(streams - 1)] + [float(units)]
    edges = [min(blocks, round(c) * unit) for c in cuts]
    edges[-1] = blocks
    return [(s, e) for s, e in zip(edges[:-1], edges[1:], strict=True) if e > s]


def chunk_rows(
    n: int, m: int, streams: int, unit: int = 1, ends: float = 1.0
) -> list[tuple[int, int, int, int]]:
    """``(first sub-system, one past the last, first row, one past the last row)`` of each stream's chunk:
    chunks hold whole sub-systems (stage 1 of a chunk needs no other chunk's rows), rows clipped to ``n``;
    inner edges at multiples of ``unit`` sub-systems, the end chunks ``ends`` of an inner one
    (``chunk_bounds``)."""
    return [(s, e, s * m, min(e * m, n)) for s, e in chunk_bounds(num_blocks(n, m), streams, unit, ends)]


def random_system(n: int, seed: int = 0, out: np.ndarray | None = None, dominance: float = 1.0) -> np.ndarray:
    """A random, strictly row diagonally dominant system: ``|b| >= |a| + |c| + dominance``, signs random.

    Written into ``out`` when given (a pinned buffer), so a 10^8-unknown system is never held twice.
    """
    rng = np.random.default_rng(seed)
    abcd = np.empty((4, n)) if out is None else out
    rng.random(out=abcd[0])
    abcd[0] -= 0.5
    rng.random(out=abcd[2])
    abcd[2] -= 0.5
    abcd[0, 0] = 0.0
    abcd[2, n - 1] = 0.0
    rng.random(out=abcd[1])
    abcd[1] += np.abs(abcd[0]) + np.abs(abcd[2]) + dominance
    abcd[1] *= np.where(rng.random(n) < 0.5, -1.0, 1.0)
    rng.random(out=abcd[3])
    abcd[3] -= 0.5
    return abcd


def heat_system(n: int, r: float = 0.5, seed: int = 0, out: np.ndarray | None = None) -> np.ndarray:
    """One implicit-Euler step of the 1-D heat equation (-r, 1+2r, -r) with Dirichlet ends, random field."""
    rng = np.random.default_rng(seed)
    abcd = np.empty((4, n)) if out is None else out
    abcd[0] = -r
    abcd[1] = 1.0 + 2.0 * r
    abcd[2] = -r
    abcd[0, 0] = 0.0
    abcd[2, n - 1] = 0.0
    rng.random(out=abcd[3])
    return abcd


def residual(abcd: np.ndarray, x: np.ndarray) -> float:
    """``||A x - d|| / ||d||`` (2-norms), in float64 on the host."""
    a, b, c, d = abcd
    r = b * x
    r[1:] += a[1:] * x[:-1]
    r[:-1] += c[:-1] * x[1:]
    r -= d
    norm_d = float(np.linalg.norm(d))
    return float(np.linalg.norm(r)) / (norm_d if norm_d > 0 else 1.0)


def to_banded(abcd: np.ndarray) -> np.ndarray:
    """The ``(3, n)`` band storage of ``scipy.linalg.solve_banded((1, 1), ...)``."""
    a, b, c, _ = abcd
    ab = np.zeros((3, abcd.shape[1]))
    ab[0, 1:] = c[:-1]
    ab[1] = b
    ab[2, :-1] = a[1:]
    return ab
