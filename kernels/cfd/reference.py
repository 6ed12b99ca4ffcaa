"""The seven kernels in numpy: the CPU backend and the reference the CUDA kernels are checked against.

Each function does, over whole arrays, exactly the arithmetic one CUDA thread does for one cell or face in
``solver.cu``, in the same order (the CUDA module is compiled with ``--fmad=false``), so the two backends
agree to the last bit except where the MMS source calls sin/cos.

Array layout (all float64, index order [var, j, i], i fastest):
  V (4, ny+4, nx+4) primitives rho, u, v, p with two ghost layers;  U0 (4, ny, nx) conserved at step start;
  xi increments (4, ny, nx+2) for cells i = -1..nx;  eta increments (4, ny+2, nx) for cells j = -1..ny;
  F (4, ny, nx+1) xi-face fluxes;  G (4, ny+1, nx) eta-face fluxes;  S, R (4, ny, nx);  dt (ny, nx).
"""

from __future__ import annotations

import numpy as np

from .physics import GAMMA

TINY = 1e-30
WALL, FIXED, EXTRAP = 1, 0, 2


def limited_slope(dm: np.ndarray, dp: np.ndarray, limiter: int) -> np.ndarray:
    """Psi(r) * dm with r = dp / dm, written without the ratio.

    The three limiters offered are symmetric, Psi(r) = r Psi(1/r), so Psi(dp/dm) dm = Psi(dm/dp) dp: both
    terms of Eq. (6) are this one limited slope. Forming it without dividing by dm and dp saves eight FP64
    divisions per cell (the ratio form left the limiter kernels instruction-bound at 82% of the copy
    bandwidth on the H100; see docs/cfd.md)."""
    if limiter == 1:  # minmod: Psi(r) = max(0, min(1, r))
        return np.where(dm * dp > 0.0, np.copysign(np.minimum(np.abs(dm), np.abs(dp)), dm), 0.0)
    if limiter == 2:  # van Leer: Psi(r) = (r + |r|) / (1 + |r|)
        return (dp * np.abs(dm) + np.abs(dp) * dm) / (np.abs(dm) + np.abs(dp) + TINY)
    if limiter == 3:  # van Albada: Psi(r) = (r^2 + r) / (r^2 + 1), clipped at zero for r < 0
        return np.maximum(0.0, dm * dp) * (dm + dp) / (dm * dm + dp * dp + TINY)
    raise ValueError(f"unknown limiter code {limiter}")


def _increments(vm, vc, vp, out_p, out_m, limiter: int, c1: float, c2: float) -> None:
    """MUSCL of Eq. (6): Q_L(k+1/2) = Q_k + incP(k), Q_R(k-1/2) = Q_k - incM(k) with c1 = eps/4 (1-kappa),
    c2 = eps/4 (1+kappa); incP = c1 Psi(dp/dm) dm + c2 Psi(dm/dp) dp and incM the same with c1, c2 swapped
    (dm, dp: the backward and forward differences of cell k). Without a limiter Psi = 1."""
    dm = vc - vm
    dp = vp - vc
    if limiter == 0:
        out_p[...] = c1 * dm + c2 * dp
        out_m[...] = c2 * dm + c1 * dp
        return
    s = limited_slope(dm, dp, limiter)
    out_p[...] = c1 * s + c2 * s
    out_m[...] = c2 * s + c1 * s


def xi_limiter(V, incp, incm, nx: int, ny: int, limiter: int, c1: float, c2: float) -> None:
    rows = slice(2, ny + 2)
    _increments(
        V[:, rows, 0 : nx + 2], V[:, rows, 1 : nx + 3], V[:, rows, 2 : nx + 4], incp, incm, limiter, c1, c2
    )


def eta_limiter(V, incp, incm, nx: int, ny: int, limiter: int, c1: float, c2: float) -> None:
    cols = slice(2, nx + 2)
    _increments(
        V[:, 0 : ny + 2, cols], V[:, 1 : ny + 3, cols], V[:, 2 : ny + 4, cols], incp, incm, limiter, c1, c2
    )


def hllc(left, right, sx, sy, out) -> None:
    """HLLC flux (Toro, Spruce & Speares 1994) through a face with area-weighted normal (sx, sy), with
    Einfeldt's wave-speed estimates from Roe averages (Batten et al. 1997), which keep density and pressure
    positive. (Roe's flux with Harten's entropy fix was tried first: it drove the pressure negative in the
    expansion at the ramp shoulder within 40 steps, the known failure of Roe's linearisation in strong
    expansions.) Supersonic faces take the upwind flux with the unnormalised face vector, so a uniform flow
    telescopes exactly."""
    g1 = GAMMA - 1.0
    gg = GAMMA / (GAMMA - 1.0)
    rl, ul, vl, pl = left
    rr, ur, vr, pr = right
    area = np.sqrt(sx * sx + sy * sy)
    nx_ = sx / area
    ny_ = sy / area
    ql = ul * nx_ + vl * ny_
    qr = ur * nx_ + vr * ny_
    cl = np.sqrt(GAMMA * pl / rl)
    cr = np.sqrt(GAMMA * pr / rr)
    kl = 0.5 * (ul * ul + vl * vl)
    kr = 0.5 * (ur * ur + vr * vr)
    hl = gg * pl / rl + kl
    hr = gg * pr / rr + kr
    sl = np.sqrt(rl)
    sr = np.sqrt(rr)
    w = sl + sr
    ut = (sl * ul + sr * ur) / w
    vt = (sl * vl + sr * vr) / w
    ht = (sl * hl + sr * hr) / w
    ct = np.sqrt(g1 * (ht - 0.5 * (ut * ut + vt * vt)))
    qt = ut * nx_ + vt * ny_
    s_l = np.minimum(ql - cl, qt - ct)
    s_r = np.maximum(qr + cr, qt + ct)
    ml = rl * (s_l - ql)
    mr = rr * (s_r - qr)
    sm = (mr * qr - ml * ql + pl - pr) / (mr - ml)
    ps = ml * (sm - ql) + pl
    vsl = ul * sx + vl * sy
    vsr = ur * sx + vr * sy
    # The star state on the side of the contact (left where sm >= 0), as the CUDA kernel picks it.
    left_star = sm >= 0.0
    m = np.where(left_star, ml, mr)
    u = np.where(left_star, ul, ur)
    v = np.where(left_star, vl, vr)
    q = np.where(left_star, ql, qr)
    p = np.where(left_star, pl, pr)
    e = np.where(left_star, pl / g1 + rl * kl, pr / g1 + rr * kr)
    s = np.where(left_star, s_l, s_r)
    with np.errstate(divide="ignore", invalid="ignore"):  # faces that take an upwind flux may divide by 0
        d = s - sm
        rs = m / d
        rus = (m * u + (ps - p) * nx_) / d
        rvs = (m * v + (ps - p) * ny_) / d
        es = ((s - q) * e - p * q + ps * sm) / d
    star = (
        area * (rs * sm),
        area * (rus * sm + ps * nx_),
        area * (rvs * sm + ps * ny_),
        area * ((es + ps) * sm),
    )
    fl = (rl * vsl, rl * ul * vsl + sx * pl, rl * vl * vsl + sy * pl, rl * hl * vsl)
    fr = (rr * vsr, rr * ur * vsr + sx * pr, rr * vr * vsr + sy * pr, rr * hr * vsr)
    up_l = s_l >= 0.0
    up_r = s_r <= 0.0
    for k in range(4):
        out[k] = np.where(up_l, fl[k], np.where(up_r, fr[k], star[k]))


def xi_flux(V, incp, incm, sxx, sxy, F, nx: int, ny: int) -> None:
    rows = slice(2, ny + 2)
    left = V[:, rows, 1 : nx + 2] + incp[:, :, 0 : nx + 1]
    right = V[:, rows, 2 : nx + 3] - incm[:, :, 1 : nx + 2]
    hllc(left, right, sxx, sxy, F)


def eta_flux(V, incp, incm, sex, sey, G, nx: int, ny: int) -> None:
    cols = slice(2, nx + 2)
    left = V[:, 1 : ny + 2, cols] + incp[:, 0 : ny + 1, :]
    right = V[:, 2 : ny + 3, cols] - incm[:, 1 : ny + 2, :]
    hllc(left, right, sex, sey, G)


def mms_source(x, y, consts) -> np.ndarray:
    """(4, ...) divergence of the Euler fluxes of the manufactured solution, from the analytic derivatives.
    ``consts`` is (4, 5) as ``physics.MMS`` with the wave numbers already multiplied by pi/L."""
    c = consts
    sxr, cxr = np.sin(c[0, 3] * x), np.cos(c[0, 3] * x)
    syr, cyr = np.sin(c[0, 4] * y), np.cos(c[0, 4] * y)
    sxu, cxu = np.sin(c[1, 3] * x), np.cos(c[1, 3] * x)
    syu, cyu = np.sin(c[1, 4] * y), np.cos(c[1, 4] * y)
    sxv, cxv = np.sin(c[2, 3] * x), np.cos(c[2, 3] * x)
    syv, cyv = np.sin(c[2, 4] * y), np.cos(c[2, 4] * y)
    sxp, cxp = np.sin(c[3, 3] * x), np.cos(c[3, 3] * x)
    syp, cyp = np.sin(c[3, 4] * y), np.cos(c[3, 4] * y)
    r = c[0, 0] + c[0, 1] * sxr + c[0, 2] * cyr
    u = c[1, 0] + c[1, 1] * sxu + c[1, 2] * cyu
    v = c[2, 0] + c[2, 1] * cxv + c[2, 2] * syv
    p = c[3, 0] + c[3, 1] * cxp + c[3, 2] * syp
    rx = c[0, 1] * c[0, 3] * cxr
    ry = -c[0, 2] * c[0, 4] * syr
    ux = c[1, 1] * c[1, 3] * cxu
    uy = -c[1, 2] * c[1, 4] * syu
    vx = -c[2, 1] * c[2, 3] * sxv
    vy = c[2, 2] * c[2, 4] * cyv
    px = -c[3, 1] * c[3, 3] * sxp
    py = c[3, 2] * c[3, 4] * cyp
    gg = GAMMA / (GAMMA - 1.0)
    q2 = u * u + v * v
    w = gg * p + 0.5 * r * q2  # rho E + p
    wx = gg * px + 0.5 * rx * q2 + r * (u * ux + v * vx)
    wy = gg * py + 0.5 * ry * q2 + r * (u * uy + v * vy)
    s0 = rx * u + r * ux + ry * v + r * vy
    s1 = rx * u * u + 2.0 * r * u * ux + px + ry * u * v + r * uy * v + r * u * vy
    s2 = rx * u * v + r * ux * v + r * u * vx + ry * v * v + 2.0 * r * v * vy + py
    s3 = ux * w + u * wx + vy * w + v * wy
    return np.stack([s0, s1, s2, s3])


def source(xc, yc, vol, consts, S, n: int, mode: int) -> None:
    """mode 0 (inlet, free stream): the source is zero but the kernel still writes it, as in the paper."""
    if mode == 0:
        S[...] = 0.0
        return
    S[...] = mms_source(xc, yc, consts.reshape(4, 5)) * vol


def rhs(F, G, S, R, nx: int, ny: int) -> None:
    R[...] = S - ((F[:, :, 1:] - F[:, :, :-1]) + (G[:, 1:, :] - G[:, :-1, :]))


def _reflect(q, sx, sy):
    r, u, v, p = q
    a = np.sqrt(sx * sx + sy * sy)
    nx_ = sx / a
    ny_ = sy / a
    un = u * nx_ + v * ny_
    return np.stack([r, u - 2.0 * un * nx_, v - 2.0 * un * ny_, p])


def update(
    U0,
    R,
    dt,
    vol,
    dtv,
    V,
    sxx,
    sxy,
    sex,
    sey,
    bw,
    be,
    bs,
    bn,
    nx: int,
    ny: int,
    alpha: float,
    cfl: float,
    first: bool,
    last: bool,
) -> None:
    """One Runge-Kutta stage U = U0 + alpha dt/vol R, then primitives and ghost cells. On the first stage the
    local time step is computed from the current state; on the last the new state becomes U0.
    Ghosts: a wall cell's mirror image (cell k writes ghost -1-k, k = 0, 1), a copy for supersonic outflow,
    nothing for fixed (inflow, free-stream, exact MMS) ghosts, which are set once."""
    g1 = GAMMA - 1.0
    Vi = V[:, 2 : ny + 2, 2 : nx + 2]
    if first:
        r, u, v, p = Vi
        c = np.sqrt(GAMMA * p / r)
        lx = np.abs(u * dtv[0] + v * dtv[1]) + c * np.sqrt(dtv[0] * dtv[0] + dtv[1] * dtv[1])
        ly = np.abs(u * dtv[2] + v * dtv[3]) + c * np.sqrt(dtv[2] * dtv[2] + dtv[3] * dtv[3])
        dt[...] = cfl * vol / (lx + ly)
    f = alpha * dt / vol
    un = U0 + f * R
    r = un[0]
    u = un[1] / r
    v = un[2] / r
    p = g1 * (un[3] - 0.5 * r * (u * u + v * v))
    Vi[0], Vi[1], Vi[2], Vi[3] = r, u, v, p
    if last:
        U0[...] = un
    fill_ghosts(V, np.stack([r, u, v, p]), sxx, sxy, sex, sey, bw, be, bs, bn, nx, ny)


def fill_ghosts(V, new, sxx, sxy, sex, sey, bw, be, bs, bn, nx: int, ny: int) -> None:
    """The ghost-cell part of ``update`` from the new interior primitives ``new`` (4, ny, nx); also used once
    to fill the initial state's wall and outflow ghosts."""
    # west (i = 0) and east (i = nx - 1) ghosts, one row per j
    for k in (0, 1):
        wall = bw == WALL
        ext = bw == EXTRAP
        ref = _reflect(new[:, :, k], sxx[:, 0], sxy[:, 0])
        V[:, 2 : ny + 2, 1 - k][:, wall] = ref[:, wall]
        if k == 0:
            V[:, 2 : ny + 2, 1][:, ext] = new[:, ext, 0]
            V[:, 2 : ny + 2, 0][:, ext] = new[:, ext, 0]
        wall = be == WALL
        ext = be == EXTRAP
        ref = _reflect(new[:, :, nx - 1 - k], sxx[:, nx], sxy[:, nx])
        V[:, 2 : ny + 2, nx + 2 + k][:, wall] = ref[:, wall]
        if k == 0:
            V[:, 2 : ny + 2, nx + 2][:, ext] = new[:, ext, nx - 1]
            V[:, 2 : ny + 2, nx + 3][:, ext] = new[:, ext, nx - 1]
    # south (j = 0) and north (j = ny - 1) ghosts, one column per i
    for k in (0, 1):
        wall = bs == WALL
        ext = bs == EXTRAP
        ref = _reflect(new[:, k, :], sex[0], sey[0])
        V[:, 1 - k, 2 : nx + 2][:, wall] = ref[:, wall]
        if k == 0:
            V[:, 1, 2 : nx + 2][:, ext] = new[:, 0, ext]
            V[:, 0, 2 : nx + 2][:, ext] = new[:, 0, ext]
        wall = bn == WALL
        ext = bn == EXTRAP
        ref = _reflect(new[:, ny - 1 - k, :], sex[ny], sey[ny])
        V[:, ny + 2 + k, 2 : nx + 2][:, wall] = ref[:, wall]
        if k == 0:
            V[:, ny + 2, 2 : nx + 2][:, ext] = new[:, ny - 1, ext]
            V[:, ny + 3, 2 : nx + 2][:, ext] = new[:, ny - 1, ext]
