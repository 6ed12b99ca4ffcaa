"""The three cases: grid, boundary types per boundary face, ghost values, initial state and source mode."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import grid as gridmod
from .physics import MMS, MMS_L, freestream, mms_exact
from .reference import EXTRAP, FIXED, WALL

CASES = ("inlet", "mms", "freestream")


@dataclass
class CaseSetup:
    """Everything the solver needs to know about a case, on the host."""

    name: str
    metrics: gridmod.Metrics
    bw: np.ndarray  # (ny,) int32 boundary type of each west (i = 0) face
    be: np.ndarray  # (ny,) east (i = nx)
    bs: np.ndarray  # (nx,) south (j = 0)
    bn: np.ndarray  # (nx,) north (j = ny)
    V: np.ndarray  # (4, ny+4, nx+4) initial primitives, ghosts of FIXED faces already final
    source_mode: int  # 0: zero source, 1: manufactured solution
    mms_consts: np.ndarray  # (4, 5) with the wave numbers times pi/L


def _ghost_centres(m: gridmod.Metrics) -> tuple[np.ndarray, np.ndarray]:
    """Cell centres on the ghosted (ny+4, nx+4) layout, ghosts by linear extrapolation along the grid lines
    (exact on the uniform Cartesian MMS grid, the only case whose ghosts depend on position)."""
    ny, nx = m.shape
    xg = np.zeros((ny + 4, nx + 4))
    yg = np.zeros((ny + 4, nx + 4))
    xg[2:-2, 2:-2], yg[2:-2, 2:-2] = m.xc, m.yc
    for a in (xg, yg):
        a[2:-2, 1] = 2 * a[2:-2, 2] - a[2:-2, 3]
        a[2:-2, 0] = 2 * a[2:-2, 1] - a[2:-2, 2]
        a[2:-2, -2] = 2 * a[2:-2, -3] - a[2:-2, -4]
        a[2:-2, -1] = 2 * a[2:-2, -2] - a[2:-2, -3]
        a[1, :] = 2 * a[2, :] - a[3, :]
        a[0, :] = 2 * a[1, :] - a[2, :]
        a[-2, :] = 2 * a[-3, :] - a[-4, :]
        a[-1, :] = 2 * a[-2, :] - a[-3, :]
    return xg, yg


def _uniform(ny: int, nx: int, w: tuple[float, float, float, float]) -> np.ndarray:
    return np.stack([np.full((ny + 4, nx + 4), q) for q in w])


def build_case(case: str, nx: int, ny: int, smoothing: int = 0) -> CaseSetup:
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}: choose one of {', '.join(CASES)}")
    consts = MMS.copy()
    consts[:, 3:] *= np.pi / MMS_L
    if case == "mms":
        m = gridmod.metrics(gridmod.square_vertices(nx, ny, MMS_L))
        xg, yg = _ghost_centres(m)
        V = mms_exact(xg, yg)
        # Start from the constant part of the solution; every ghost holds the exact solution (supersonic
        # inflow on west and south, and on east and north the upwind flux never reads them).
        for q in range(4):
            V[q, 2:-2, 2:-2] = MMS[q, 0]
        fixed = np.int32(FIXED)
        bw, be = np.full(ny, fixed), np.full(ny, fixed)
        bs, bn = np.full(nx, fixed), np.full(nx, fixed)
        return CaseSetup(case, m, bw, be, bs, bn, V, 1, consts)
    m = gridmod.metrics(gridmod.inlet_vertices(nx, ny, smoothing))
    V = _uniform(ny, nx, freestream())
    if case == "freestream":
        # Every boundary holds the free stream, so the exact discrete solution is the uniform initial state.
        z = np.int32(FIXED)
        return CaseSetup(
            case, m, np.full(ny, z), np.full(ny, z), np.full(nx, z), np.full(nx, z), V, 0, consts
        )
    # inlet: slip walls on the symmetry line ahead of the ramp (xi_min), the ramp and floor (eta_min) and the
    # cowl (eta_max where y = 0.6); supersonic inflow (fixed free stream) on the curved part of eta_max;
    # supersonic outflow (zeroth-order extrapolation) at x = 1.5 (xi_max).
    bw = np.full(ny, WALL, np.int32)
    be = np.full(ny, EXTRAP, np.int32)
    bs = np.full(nx, WALL, np.int32)
    top = m.vertices[-1]
    on_cowl = (np.abs(top[:-1, 1] - gridmod.COWL_Y) < 1e-12) & (np.abs(top[1:, 1] - gridmod.COWL_Y) < 1e-12)
    bn = np.where(on_cowl, WALL, FIXED).astype(np.int32)
    return CaseSetup(case, m, bw, be, bs, bn, V, 0, consts)
