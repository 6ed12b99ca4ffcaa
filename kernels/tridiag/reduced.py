"""Stage 2 on the device: how the interface (reduced) system is solved without a trip to the host.

The interface system of ``2p`` unknowns (``p = ceil(n / m)`` sub-systems) is tridiagonal again, so the
partition method applies to it once more, with sub-systems of ``mr`` rows (``MR``, 32 by default): each level
shrinks the system by ``mr / 2`` (16x), with the same stage-1 / stage-3 kernels as the top level. Once a level
has at most ``PCR_MAX`` (1024) unknowns, one thread block solves it by parallel cyclic reduction (PCR) in
shared memory: ``log2`` steps with a barrier each, no serial chain. So stage 2 at 10^7 unknowns (m = 10) is
2 x 10^6 -> 125,000 -> 7,814 -> 490 unknowns: three reduction levels, one PCR block, three back-substitutions,
seven small kernels on one stream, all enqueued before any of them runs.

Why this and not cuSPARSE on the reduced system: ``gtsv2_nopivot`` on the 2p-unknown interface system is the
alternative the benchmark measures beside it (``benchmarks/tridiag_streams.py``, ``stage2_alternatives``);
why not a single-thread Thomas solve on the device: its serial chain of divisions takes ~0.1 us per unknown,
0.2 s at 2 x 10^6. The interface system of a diagonally dominant matrix is diagonally dominant (a Schur
complement), and so is every further level, so elimination without pivoting is safe on each.

This module is the numpy version of exactly those steps (the reference the CUDA kernels are tested against),
the plan of levels, and the device-memory account that decides the largest size one card can take.
"""

from __future__ import annotations

import numpy as np

from . import partition
from .system import TridiagError, ZeroPivotError, num_blocks

MR = 32  # rows per sub-system on the reduced levels (a compile-time constant of the kernels)
PCR_MAX = 1024  # the last level is solved by one block of at most this many threads (shared memory: 32 KiB)
PCR_BIG = 2 * PCR_MAX  # pcr_big: one block of PCR_MAX threads, two rows each (the SPIKE top system only)
F8 = 8


class TridiagMemoryError(TridiagError, MemoryError):
    """The system does not fit on the device (or in pinned host memory): size, need and what is free."""


def plan_levels(n_iface: int, mr: int = MR, small: int = PCR_MAX) -> list[int]:
    """Unknowns of each reduced level, the interface system first, down to one of at most ``small``.

    ``[2e6, 125000, 7814, 490]`` for the interface system of 10^7 unknowns with m = 10 and ``mr = 32``.
    """
    if mr < 3:
        raise TridiagError(f"reduced sub-system size mr={mr} must be at least 3")
    if n_iface < 1:
        raise TridiagError(f"interface system of {n_iface} unknowns: need at least one")
    sizes = [int(n_iface)]
    while sizes[-1] > small:
        sizes.append(2 * num_blocks(sizes[-1], mr))
    return sizes


def chunk_unit(sizes: list[int], mr: int = MR) -> int:
    """Top-level sub-systems per aligned chunk unit, ``(mr / 2) ** levels`` for the levels ``sizes`` of
    ``plan_levels``: a chunk whose edges are multiples of it reduces into whole groups of every level."""
    return (mr // 2) ** (len(sizes) - 1)


def level_groups(sizes: list[int], p: int, s: int, e: int, mr: int = MR) -> list[tuple[int, int]]:
    """The ``[lo, hi)`` groups of ``mr`` rows, on each reduced level of ``sizes``, that top-level sub-systems
    ``[s, e)`` of ``p`` feed (``s``, ``e`` multiples of ``chunk_unit``, or ``e == p``).

    Sub-system ``k`` writes interface rows ``2k, 2k + 1`` of level 0, so level 0's group ``g`` (rows ``32 g``
    onwards, ``mr = 32``) holds sub-systems ``16 g`` onwards, and level ``l``'s group ``g`` those from
    ``g 16^(l+1)``. The last chunk takes every group to the end of each level, the partial last one included.
    """
    half, out = mr // 2, []
    for lvl, size in enumerate(sizes[:-1]):
        g = half ** (lvl + 1)
        out.append((s // g, num_blocks(size, mr) if e >= p else e // g))
    return out


def pcr_block(n: int) -> int:
    """Threads of the one PCR block for a last level of ``n`` unknowns: a power of two, at least a warp."""
    if not 1 <= n <= PCR_MAX:
        raise TridiagError(f"the PCR block takes 1..{PCR_MAX} unknowns, not {n}")
    return max(32, 1 << (n - 1).bit_length())


def pcr(abcd: np.ndarray, width: int | None = None) -> np.ndarray:
    """Parallel cyclic reduction on a ``(4, n)`` system, vectorised over rows: the steps of ``pcr_small``.

    ``width`` (default: ``pcr_block(n)``) is the number of rows the block holds; rows past ``n`` are identity
    rows, as in the kernel, so the result is bit-for-bit the same algorithm.
    """
    n = abcd.shape[1]
    width = pcr_block(n) if width is None else width
    a, b, c, d = (np.zeros(width) for _ in range(4))
    b[:] = 1.0
    a[:n], b[:n], c[:n], d[:n] = abcd
    a[0] = 0.0
    c[n - 1] = 0.0
    if not np.all(np.isfinite(abcd[:, :n])):
        raise TridiagError("NaN or Inf in the reduced system")
    if not np.all(b != 0.0):
        raise ZeroPivotError("zero pivot in the reduced system's PCR (a zero diagonal entry)")
    r = 1.0 / b  # each row's reciprocal, for its neighbours: one division per row and step, as in the kernel
    s = 1
    while s < width:
        lo = np.arange(width) - s
        hi = np.arange(width) + s
        ok_lo, ok_hi = lo >= 0, hi < width
        lo_c, hi_c = np.clip(lo, 0, width - 1), np.clip(hi, 0, width - 1)
        am, rm = np.where(ok_lo, a[lo_c], 0.0), np.where(ok_lo, r[lo_c], 1.0)
        cm, dm = np.where(ok_lo, c[lo_c], 0.0), np.where(ok_lo, d[lo_c], 0.0)
        ap, rp = np.where(ok_hi, a[hi_c], 0.0), np.where(ok_hi, r[hi_c], 1.0)
        cpv, dpv = np.where(ok_hi, c[hi_c], 0.0), np.where(ok_hi, d[hi_c], 0.0)
        k1, k2 = a * rm, c * rp
        a, b, c, d = -am * k1, b - cm * k1 - ap * k2, -cpv * k2, d - dm * k1 - dpv * k2
        if not np.all(b != 0.0):
            raise ZeroPivotError(f"zero pivot in the reduced system's PCR step (stride {s})")
        r = 1.0 / b
        s *= 2
    return d[:n] / b[:n]


def solve_reduced(iface: np.ndarray, mr: int = MR, small: int = PCR_MAX) -> np.ndarray:
    """Solve a ``(4, N)`` interface system as the device does: partition levels of ``mr``, PCR at the end."""
    n = iface.shape[1]
    if n <= small:
        return pcr(iface)
    blocks = partition.padded_blocks(iface, mr)
    nxt = partition.stage1(blocks)
    z = solve_reduced(nxt, mr, small)
    return partition.stage3(blocks, z).reshape(-1)[:n]


SLICE = 512  # sub-systems per SPIKE slice by default: one block of the spike kernels (compiled in)
SLICE_CHOICES = (32, 64, 128, 256, 512)  # 2 x 512 rows x 6 arrays fill the 48 KiB of static shared memory


def spike_top_rows(ends: np.ndarray, a_first: float, c_last: float) -> np.ndarray:
    """The two rows of the top system that one slice contributes, ``(4, 2)``: for its first unknown u and its
    last unknown w, from the ends of its spikes.

    The slice's interface solution is ``z = P - a_first w_prev R - c_last u_next Q`` (``ends`` = P, R, Q at
    its first and last row: ``[[P0, PL], [R0, RL], [Q0, QL]]``). Taking ``z`` at the first and the last row
    gives two equations that each hold both ``w_prev`` and ``u_next``; combining them so that the first loses
    ``u_next`` and the second ``w_prev`` leaves a tridiagonal system in ``(u_0, w_0, u_1, w_1, ...)``:

        u:  a_first (R0 - Q0 RL / QL) w_prev + u + (-Q0 / QL) w        = P0 - Q0 PL / QL
        w:  (-RL / R0) u + w + c_last (QL - RL Q0 / R0) u_next         = PL - RL P0 / R0

    (``R0``, ``QL`` are diagonal entries of the slice's inverse: nonzero for a diagonally dominant slice).
    """
    (p0, pl), (r0, rl), (q0, ql) = ends
    return np.array(
        [
            [a_first * (r0 - q0 * rl / ql), -rl / r0],
            [1.0, 1.0],
            [-q0 / ql, c_last * (ql - rl * q0 / r0)],
            [p0 - q0 * pl / ql, pl - rl * p0 / r0],
        ]
    )


def top_levels(n_top: int) -> list[int]:
    """The levels of a SPIKE top system of ``n_top`` unknowns: one ``pcr_big`` block up to ``PCR_BIG``
    (rather than a partition level, a PCR block and the way back), else as stage 2 (``plan_levels``)."""
    return [n_top] if PCR_MAX < n_top <= PCR_BIG else plan_levels(n_top)


def solve_top(top: np.ndarray) -> np.ndarray:
    """The SPIKE top system solved as the kernels do (``top_levels``)."""
    n_top = top.shape[1]
    return pcr(top, width=PCR_BIG) if len(top_levels(n_top)) == 1 and n_top > PCR_MAX else solve_reduced(top)


def solve_spike(iface: np.ndarray, rows: int = 2 * SLICE) -> np.ndarray:
    """Solve a ``(4, N)`` interface system as the spike kernels do: slices of ``rows`` rows, each solved by
    PCR for its own ``d`` and two unit vectors with its outer couplings cut, a top system of two rows per
    slice (``spike_top_rows``) solved as stage 2 is, then each slice's ``z`` from its spikes."""
    n = iface.shape[1]
    slices = -(-n // rows)
    full = np.zeros((4, slices * rows))
    full[1] = 1.0  # identity rows past n, as the kernel's sub-systems >= p
    full[:, :n] = iface
    full[0, 0] = 0.0
    full[2, n - 1] = 0.0
    prq = np.empty((3, slices, rows))
    top = np.empty((4, 2 * slices))
    cuts = np.empty((2, slices))
    for sl in range(slices):
        block = full[:, sl * rows : (sl + 1) * rows].copy()
        cuts[:, sl] = block[0, 0], block[2, -1]
        block[0, 0] = block[2, -1] = 0.0
        for i, rhs in enumerate((block[3], np.eye(1, rows, 0)[0], np.eye(1, rows, rows - 1)[0])):
            prq[i, sl] = pcr(np.vstack([block[:3], rhs]), width=rows)
        top[:, 2 * sl : 2 * sl + 2] = spike_top_rows(prq[:, sl, [0, -1]], *cuts[:, sl])
    y = solve_top(top)
    w_prev = np.concatenate([[0.0], y[1:-1:2]])  # the last unknown of the slice before (none for the first)
    u_next = np.concatenate([y[2::2], [0.0]])  # the first unknown of the slice after (none for the last)
    z = prq[0] - (cuts[0] * w_prev)[:, None] * prq[1] - (cuts[1] * u_next)[:, None] * prq[2]
    return z.reshape(-1)[:n]


def spike_bytes(p: int, slice_size: int = SLICE, mr: int = MR) -> int:
    """Device bytes of the SPIKE slices for ``p`` sub-systems: P, R, Q (``3 x 2 SLICE`` per slice), the two
    couplings per slice and the top system's levels (48 B per sub-system, 4.8 B/unknown at m = 10)."""
    slices = -(-p // slice_size)
    top = sum(4 * F8 * k for k in plan_levels(2 * slices, mr))
    return F8 * (3 * 2 * slice_size * slices + 2 * slices) + top


def level_bytes(n: int, m: int, mr: int = MR) -> int:
    """Device bytes of every reduced level of an ``n``-unknown system (four rows of float64 each)."""
    return sum(4 * F8 * k for k in plan_levels(2 * num_blocks(n, m), mr))


def device_bytes(n: int, m: int, mr: int = MR, resident: bool = False) -> int:
    """Device memory one solve needs: the levels, plus the system (32 B/unknown, the solution written over d)
    on the host-to-host path; on the device-resident path the system is the caller's and only ``x`` (8
    B/unknown) is new."""
    system = 8 * n if resident else 4 * F8 * n
    return system + level_bytes(n, m, mr) + 4096


def max_unknowns(free_bytes: int, m: int, mr: int = MR, resident: bool = False) -> int:
    """The largest ``n`` whose ``device_bytes`` fits in ``free_bytes`` (bisection: the count is monotone)."""
    lo, hi = 0, max(1, int(free_bytes) // 8 + 1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if device_bytes(mid, m, mr, resident) <= free_bytes:
            lo = mid
        else:
            hi = mid - 1
    return lo


def check_fits(
    n: int,
    m: int,
    free_bytes: int,
    device: str = "the device",
    mr: int = MR,
    resident: bool = False,
    reserve: int = 256 << 20,
) -> None:
    """``TridiagMemoryError`` naming the size, the need and what is free, before anything is allocated."""
    need = device_bytes(n, m, mr, resident)
    if need + reserve > free_bytes:
        limit = max_unknowns(max(free_bytes - reserve, 0), m, mr, resident)
        raise TridiagMemoryError(
            f"n = {n:,} unknowns need {need / 1e9:.2f} GB on {device} ({need / n:.1f} B/unknown at m = {m}), "
            f"{free_bytes / 1e9:.2f} GB free: the largest system that fits now is {limit:,} unknowns"
        )
