"""Structured grids and their finite-volume metrics.

The inlet geometry is Table 1 of Xue & Roy (the SENSEI 30-degree supersonic inlet); the MMS case runs on the
unit square of Roy et al. (2004). Grids are built once on the host in float64 and copied to the device by the
solver.

Index convention everywhere: vertex ``(i, j)`` with ``i`` along xi (the flow direction) and ``j`` along eta
(``j = 0`` on the ramp wall). Arrays are stored ``[j, i]`` so that ``i`` is the fastest (contiguous) index: on
the GPU consecutive threads then touch consecutive addresses for both the xi and the eta stencils.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RAMP_ANGLE_DEG = 30.0
FLOOR_Y = 0.2  # m, the flat floor after the ramp (Table 1, eta_min)
COWL_Y = 0.6  # m, the cowl line (Table 1, eta_max)
X_OUT = 1.5  # m, the outflow plane (Table 1, xi_max)
X_LEAD = -0.05  # m, where the inflow curve meets y = 0 (Table 1, xi_min)
COWL_LIP_X = 0.5  # m, where the inflow curve meets the cowl line


def inflow_curve_x(y: np.ndarray) -> np.ndarray:
    """Table 1, eta_max: x = -0.05 + 3y^2 - 7.5y^4 + 9.5y^6 for 0 <= y <= 0.6 (the curved inflow boundary)."""
    return X_LEAD + 3.0 * y**2 - 7.5 * y**4 + 9.5 * y**6


def _resample(points: np.ndarray, n: int) -> np.ndarray:
    """``n + 1`` points equally spaced in arc length along a dense polyline (so both eta-boundaries carry
    matching fractions of their length, which keeps the transfinite grid lines well spread)."""
    seg = np.hypot(*np.diff(points, axis=0).T)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    t = np.linspace(0.0, s[-1], n + 1)
    return np.stack([np.interp(t, s, points[:, 0]), np.interp(t, s, points[:, 1])], axis=1)


def _inlet_boundaries(nx: int, ny: int, dense: int = 20000) -> tuple[np.ndarray, ...]:
    tan = np.tan(np.radians(RAMP_ANGLE_DEG))
    # eta_min: the ramp y = x tan(30 deg) up to the floor height, then the floor y = 0.2. Table 1 lets the
    # ramp run to x = 0.35 (y = 0.2021), 2 mm above the floor; we end the ramp where it meets y = 0.2 (x =
    # 0.3464) so the wall is continuous.
    x_corner = FLOOR_Y / tan
    xb = np.concatenate([np.linspace(0.0, x_corner, dense), np.linspace(x_corner, X_OUT, dense)[1:]])
    bottom = np.stack([xb, np.minimum(xb * tan, FLOOR_Y)], axis=1)
    # eta_max: the inflow curve from (-0.05, 0) to the cowl lip (~0.50, 0.6), then the cowl y = 0.6 to x =
    # 1.5.
    yc = np.linspace(0.0, COWL_Y, dense)
    curve = np.stack([inflow_curve_x(yc), yc], axis=1)
    cowl = np.stack([np.linspace(curve[-1, 0], X_OUT, dense)[1:], np.full(dense - 1, COWL_Y)], axis=1)
    top = np.concatenate([curve, cowl])
    bottom, top = _resample(bottom, nx), _resample(top, nx)
    # xi_min: y = 0 from the ramp tip (0, 0) back to (-0.05, 0); xi_max: x = 1.5 from the floor to the cowl.
    eta = np.linspace(0.0, 1.0, ny + 1)[:, None]
    left = (1 - eta) * bottom[0] + eta * top[0]
    right = (1 - eta) * bottom[-1] + eta * top[-1]
    return bottom, top, left, right


def transfinite(bottom: np.ndarray, top: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Coons-patch (transfinite) interpolation of four boundary curves; returns vertices shaped (ny+1,
    nx+1, 2)."""
    nx, ny = len(bottom) - 1, len(left) - 1
    xi = np.linspace(0.0, 1.0, nx + 1)[None, :, None]
    et = np.linspace(0.0, 1.0, ny + 1)[:, None, None]
    b, t = bottom[None], top[None]
    lf, rt = left[:, None], right[:, None]
    corners = (
        (1 - xi) * (1 - et) * bottom[0]
        + xi * (1 - et) * bottom[-1]
        + (1 - xi) * et * top[0]
        + xi * et * top[-1]
    )
    return (1 - et) * b + et * t + (1 - xi) * lf + xi * rt - corners


def winslow_smooth(v: np.ndarray, iterations: int) -> np.ndarray:
    """Elliptic (Winslow) smoothing with the boundary held fixed: Jacobi sweeps of the discretised
    a x_xixi - 2 b x_xieta + c x_etaeta = 0. Boundary points stay where Table 1 puts them."""
    v = v.copy()
    for _ in range(iterations):
        x_xi = 0.5 * (v[1:-1, 2:] - v[1:-1, :-2])
        x_et = 0.5 * (v[2:, 1:-1] - v[:-2, 1:-1])
        a = (x_et**2).sum(-1, keepdims=True)
        c = (x_xi**2).sum(-1, keepdims=True)
        b = (x_xi * x_et).sum(-1, keepdims=True)
        cross = 0.25 * (v[2:, 2:] - v[2:, :-2] - v[:-2, 2:] + v[:-2, :-2])
        new = (a * (v[1:-1, 2:] + v[1:-1, :-2]) + c * (v[2:, 1:-1] + v[:-2, 1:-1]) - 2 * b * cross) / (
            2 * (a + c)
        )
        v[1:-1, 1:-1] = new
    return v


def inlet_vertices(nx: int, ny: int, smoothing: int = 0) -> np.ndarray:
    v = transfinite(*_inlet_boundaries(nx, ny))
    return winslow_smooth(v, smoothing) if smoothing else v


def square_vertices(nx: int, ny: int, length: float = 1.0) -> np.ndarray:
    x = np.linspace(0.0, length, nx + 1)
    y = np.linspace(0.0, length, ny + 1)
    return np.stack(np.meshgrid(x, y, indexing="xy"), axis=-1)


@dataclass
class Metrics:
    """Finite-volume metrics, computed once. Face vectors are area-weighted normals (|S| = face length) so the
    central part of the flux telescopes exactly for a uniform flow (free-stream preservation)."""

    vertices: np.ndarray  # (ny+1, nx+1, 2)
    xc: np.ndarray  # (ny, nx) cell centres
    yc: np.ndarray
    vol: np.ndarray  # (ny, nx) cell areas
    sxx: np.ndarray  # (ny, nx+1) xi-face vector x component, pointing towards +i
    sxy: np.ndarray
    sex: np.ndarray  # (ny+1, nx) eta-face vector, pointing towards +j
    sey: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return self.vol.shape

    def cell_dt_vectors(self) -> np.ndarray:
        """(4, ny, nx): the mean xi- and eta-face vectors of each cell, for the local time step."""
        return np.stack(
            [
                0.5 * (self.sxx[:, :-1] + self.sxx[:, 1:]),
                0.5 * (self.sxy[:, :-1] + self.sxy[:, 1:]),
                0.5 * (self.sex[:-1, :] + self.sex[1:, :]),
                0.5 * (self.sey[:-1, :] + self.sey[1:, :]),
            ]
        )


def metrics(v: np.ndarray) -> Metrics:
    x, y = v[..., 0], v[..., 1]
    # xi-face between vertices (i, j) and (i, j+1): edge (dx, dy), normal towards +i is (dy, -dx).
    dx, dy = x[1:, :] - x[:-1, :], y[1:, :] - y[:-1, :]
    sxx, sxy = dy, -dx
    # eta-face between vertices (i, j) and (i+1, j): edge (dx, dy), normal towards +j is (-dy, dx).
    dx, dy = x[:, 1:] - x[:, :-1], y[:, 1:] - y[:, :-1]
    sex, sey = -dy, dx
    # Area from the cross product of the diagonals (exact for any planar quadrilateral).
    d1x, d1y = x[1:, 1:] - x[:-1, :-1], y[1:, 1:] - y[:-1, :-1]
    d2x, d2y = x[1:, :-1] - x[:-1, 1:], y[1:, :-1] - y[:-1, 1:]
    vol = 0.5 * (d1x * d2y - d1y * d2x)
    xc = 0.25 * (x[:-1, :-1] + x[:-1, 1:] + x[1:, :-1] + x[1:, 1:])
    yc = 0.25 * (y[:-1, :-1] + y[:-1, 1:] + y[1:, :-1] + y[1:, 1:])
    if not np.all(vol > 0):
        raise ValueError(f"grid has {int((vol <= 0).sum())} cells with non-positive area")
    return Metrics(v, xc, yc, vol, sxx, sxy, sex, sey)
