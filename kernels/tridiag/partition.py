"""The Austin-Berndt-Moulton partition method in numpy: the reference every GPU result is checked against.

The ``n`` unknowns are cut into ``p = ceil(n / m)`` sub-systems of ``m`` rows (the last padded with identity
rows, ``x = 0``, so no size is special). The first and last unknown of each sub-system are its *interface*
unknowns.

Stage 1 (device in the CUDA version): in sub-system ``k`` with first row ``r0`` and last row ``r1``, the
interior unknowns satisfy ``x_I = y - x[r0] u - x[r1] v`` where ``T_I`` is the interior tridiagonal block and
``T_I y = d_I``, ``T_I u = a[r0+1] e_first``, ``T_I v = c[r1-1] e_last``. Putting this into rows ``r0`` and
``r1`` leaves two equations in interface unknowns only:

    row 2k:   a[r0] x[r1 of k-1] + (b[r0] - c[r0] u_first) x[r0] - c[r0] v_first x[r1] = d[r0] - c[r0] y_first
    row 2k+1: (-a[r1] u_last) x[r0] + (b[r1] - a[r1] v_last) x[r1] + c[r1] x[r0 of k+1] = d[r1] - a[r1] y_last

so each sub-system writes two rows of a ``2p`` tridiagonal *interface system* from its own data alone; a
stream that owns a chunk of sub-systems needs nothing from its neighbours. Only the first and last entries of
``y``, ``u`` and ``v`` are needed: a top-down elimination ends on the last entries and a bottom-up one on the
first, so neither stores a vector (the memory-efficient trick of the method).

Stage 2 (host): the interface system is solved by LAPACK's tridiagonal solver ``dgtsv`` (Gaussian elimination
with partial pivoting in compiled code, in place on the buffer stage 1 filled). A pure-Python Thomas loop
would be ~100x slower at 2 * 10^7 interface unknowns, and the interface system of a diagonally dominant matrix
is itself diagonally dominant (a Schur complement), so the solver never meets a zero pivot there unless the
input is bad.

Stage 3 (device): with ``x[r0]`` and ``x[r1]`` known, each sub-system's interior is one Thomas solve.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

from .system import ZeroPivotError, num_blocks


def padded_blocks(abcd: np.ndarray, m: int) -> np.ndarray:
    """``(4, p, m)`` copy of the system with ``a[0] = c[n-1] = 0`` and identity rows after row ``n - 1``."""
    n = abcd.shape[1]
    p = num_blocks(n, m)
    out = np.zeros((4, p * m))
    out[:, :n] = abcd
    out[1, n:] = 1.0
    out[0, 0] = 0.0
    out[2, n - 1] = 0.0
    return out.reshape(4, p, m)


def _sweep(
    sub: np.ndarray, diag: np.ndarray, sup: np.ndarray, rhs: list[np.ndarray], first: int
) -> list[np.ndarray]:
    """Eliminate along axis 1 and return the solution entries at the far end, for each right-hand side.

    ``sub/diag/sup`` are ``(blocks, J)``; the elimination runs top-down (answers the last entries) or, with
    ``sub`` and ``sup`` swapped and the rows reversed, bottom-up (answers the first entries).
    """
    blocks, rows = diag.shape
    cp = np.zeros(blocks)
    vals = [np.zeros(blocks) for _ in rhs]
    order = range(rows) if first == 0 else range(rows - 1, -1, -1)
    for j in order:
        den = diag[:, j] - sub[:, j] * cp
        if not np.all(den != 0.0):
            raise ZeroPivotError(f"zero pivot in sub-system {int(np.argmin(np.abs(den)))}, interior row {j}")
        cp = sup[:, j] / den
        vals = [(r[:, j] - sub[:, j] * v) / den for r, v in zip(rhs, vals, strict=True)]
    return vals


def stage1(blocks: np.ndarray) -> np.ndarray:
    """Interface-system rows of a run of sub-systems: ``(4, 2 * len)`` (sub, diag, super, rhs)."""
    a, b, c, d = blocks  # each (k, m)
    k, m = b.shape
    ia, ib, ic, id_ = a[:, 1 : m - 1], b[:, 1 : m - 1], c[:, 1 : m - 1], d[:, 1 : m - 1]
    zero = np.zeros_like(ib)
    ru = zero.copy()
    ru[:, 0] = a[:, 1]
    rv = zero.copy()
    rv[:, -1] = c[:, m - 2]
    # top-down: last entries; bottom-up (sub and super swap roles): first entries
    y_last, u_last, v_last = _sweep(ia, ib, ic, [id_, ru, rv], first=0)
    y_first, u_first, v_first = _sweep(ic, ib, ia, [id_, ru, rv], first=1)
    out = np.empty((4, 2 * k))
    out[0, 0::2] = a[:, 0]
    out[1, 0::2] = b[:, 0] - c[:, 0] * u_first
    out[2, 0::2] = -c[:, 0] * v_first
    out[3, 0::2] = d[:, 0] - c[:, 0] * y_first
    out[0, 1::2] = -a[:, m - 1] * u_last
    out[1, 1::2] = b[:, m - 1] - a[:, m - 1] * v_last
    out[2, 1::2] = c[:, m - 1]
    out[3, 1::2] = d[:, m - 1] - a[:, m - 1] * y_last
    return out


def stage2(interface: np.ndarray) -> np.ndarray:
    """Solve the ``(4, 2p)`` interface system in place (LAPACK dgtsv); returns the solution's view."""
    dl, d, du, rhs = interface[0, 1:], interface[1], interface[2, :-1], interface[3]
    if rhs.size == 1:  # dgtsv's f2py wrapper rejects empty off-diagonals
        if d[0] == 0.0:
            raise ZeroPivotError("zero pivot in the interface system at row 0: the matrix is singular")
        rhs /= d
        return rhs
    *_, z, info = lapack.dgtsv(dl, d, du, rhs, overwrite_dl=1, overwrite_d=1, overwrite_du=1, overwrite_b=1)
    if info > 0:
        raise ZeroPivotError(f"zero pivot in the interface system at row {info - 1}: the matrix is singular")
    if info < 0:
        raise ValueError(f"dgtsv rejected argument {-info}")
    return z


def stage3(blocks: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Every unknown of a run of sub-systems, given its interface values ``z`` (``2 * len``): ``(len, m)``."""
    a, b, c, d = blocks
    k, m = b.shape
    x = np.empty((k, m))
    x[:, 0] = z[0::2]
    x[:, m - 1] = z[1::2]
    rhs = d[:, 1 : m - 1].copy()
    rhs[:, 0] -= a[:, 1] * x[:, 0]
    rhs[:, -1] -= c[:, m - 2] * x[:, m - 1]
    ia, ib, ic = a[:, 1 : m - 1], b[:, 1 : m - 1], c[:, 1 : m - 1]
    J = m - 2
    cp = np.zeros((k, J))
    dp = np.zeros((k, J))
    for j in range(J):
        den = ib[:, j] - ia[:, j] * (cp[:, j - 1] if j else 0.0)
        if not np.all(den != 0.0):
            raise ZeroPivotError(f"zero pivot in sub-system {int(np.argmin(np.abs(den)))}, interior row {j}")
        cp[:, j] = ic[:, j] / den
        dp[:, j] = (rhs[:, j] - ia[:, j] * (dp[:, j - 1] if j else 0.0)) / den
    x[:, J] = dp[:, J - 1]
    for j in range(J - 2, -1, -1):
        x[:, j + 1] = dp[:, j] - cp[:, j] * x[:, j + 2]
    return x
