"""The Mach-number figure with streamlines (after Fig. 8a of Xue & Roy)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.interpolate import LinearNDInterpolator


def mach_figure(
    x: np.ndarray, y: np.ndarray, mach: np.ndarray, u: np.ndarray, v: np.ndarray, path: Path, title: str = ""
) -> Path:
    """Filled Mach contours on the curvilinear grid, streamlines from the velocity resampled onto a regular
    grid (matplotlib's streamplot needs one; points outside the domain are masked)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    step_i = max(1, x.shape[0] // 400)
    step_j = max(1, x.shape[1] // 130)
    xs, ys = x[::step_i, ::step_j], y[::step_i, ::step_j]
    us, vs = u[::step_i, ::step_j], v[::step_i, ::step_j]
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=120)
    cs = ax.contourf(
        x[::step_i, ::step_j], y[::step_i, ::step_j], mach[::step_i, ::step_j], levels=40, cmap="jet"
    )
    fig.colorbar(cs, ax=ax, label="Mach number")
    gx = np.linspace(xs.min(), xs.max(), 300)
    gy = np.linspace(ys.min(), ys.max(), 120)
    GX, GY = np.meshgrid(gx, gy)
    pts = np.column_stack([xs.ravel(), ys.ravel()])
    interp = LinearNDInterpolator(pts, np.column_stack([us.ravel(), vs.ravel()]))
    uv = interp(GX, GY)
    # Drop resampled points outside the domain (the convex hull covers the cowl's shadow too).
    from matplotlib.path import Path as MplPath

    boundary = np.concatenate(
        [
            np.column_stack([x[:, 0], y[:, 0]]),
            np.column_stack([x[-1, :], y[-1, :]]),
            np.column_stack([x[::-1, -1], y[::-1, -1]]),
            np.column_stack([x[0, ::-1], y[0, ::-1]]),
        ]
    )
    inside = MplPath(boundary).contains_points(np.column_stack([GX.ravel(), GY.ravel()])).reshape(GX.shape)
    U = np.where(inside, uv[..., 0], np.nan)
    V = np.where(inside, uv[..., 1], np.nan)
    ax.streamplot(gx, gy, U, V, color="k", linewidth=0.5, density=1.6, arrowsize=0.6)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
