"""Order-of-accuracy verification with the manufactured solution: converge each grid, measure the error."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..progress import Progress
from .physics import mms_exact
from .solver import Scheme, Solver


def converge(
    solver: Solver,
    max_steps: int,
    drop: float,
    every: int = 50,
    progress: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Step until the largest per-equation residual has fallen by ``drop`` orders (or ``max_steps``)."""
    first = None
    orders = 0.0
    steps = 0
    for steps in range(1, max_steps + 1):
        norms = solver.step(residuals=(steps - 1) % every == 0)
        if norms is None:
            continue
        if not np.all(np.isfinite(norms)):
            raise FloatingPointError(f"residual is not finite after {steps} steps")
        if first is None:
            first = np.maximum(norms, 1e-300)
        orders = float(-np.log10(np.max(norms / first)))
        if progress:
            progress(steps, orders)
        if orders >= drop:
            break
    return {"steps": steps, "orders": orders}


def discretisation_error(solver: Solver) -> dict[str, float]:
    """L2 (root-mean-square over cells) of the error in each primitive variable against the exact solution."""
    w = solver.primitives()  # (4, nx, ny)
    m = solver.setup.metrics
    exact = mms_exact(m.xc.T, m.yc.T)
    err = w - exact
    names = ("rho", "u", "v", "p")
    return {f"l2_{n}": float(np.sqrt(np.mean(err[q] ** 2))) for q, n in enumerate(names)}


def observed_orders(sizes: Sequence[int], errors: Sequence[float]) -> list[float]:
    """Observed order between successive grids: log(e_coarse / e_fine) / log(h_coarse / h_fine)."""
    return [
        math.log(errors[k] / errors[k + 1]) / math.log(sizes[k + 1] / sizes[k]) for k in range(len(sizes) - 1)
    ]


def _ticker(write: Callable[[str], None], n: int, limit: int, drop: float) -> Callable[[int, float], None]:
    """``converge``'s progress callback for one grid: a line at least every 10 s, the part done being the
    larger of the steps' and the residual drop's (the grid's own summary line ends it)."""
    meter = Progress(write)

    def tick(steps: int, orders: float) -> None:
        meter.update(
            min(max(steps / limit, orders / drop), 0.99),
            lambda: f"mms {n}x{n}: step {steps}, residual down {orders:.1f} of {drop:g} orders",
        )

    return tick


def run_mms(
    sizes: Sequence[int],
    backend: str = "numpy",
    scheme: Scheme | None = None,
    drop: float = 10.0,
    max_steps: int | None = None,
    progress: Callable[[str], None] | None = None,
    config: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Converge the MMS case on N x N grids for each N in ``sizes``; errors and observed orders. ``config``
    overrides launch parameters of the default configuration, e.g. ``{"fusion": 2, "tile.block_x": 32}`` to
    verify a fused level."""
    rows = []
    for n in sizes:
        solver = Solver("mms", (n, n), backend, scheme=scheme)
        if config:
            solver.set_config({**solver.default_config(), **config})
        limit = max_steps or 60 * n + 500
        # a fine grid on a CPU converges for minutes: a line at least every 10 s
        tick = _ticker(progress, n, limit, drop) if progress else None
        info = converge(solver, limit, drop, progress=tick)
        errs = discretisation_error(solver)
        rows.append({"size": n, **info, **errs})
        if progress:
            progress(
                f"mms {n}x{n}: {info['steps']} steps, residual down {info['orders']:.1f} orders, "
                f"L2(rho) error {errs['l2_rho']:.4e}"
            )
    l2 = [r["l2_rho"] for r in rows]
    return {
        "sizes": list(sizes),
        "l2_rho": l2,
        "order_rho": observed_orders(sizes, l2),
        "l2_p": [r["l2_p"] for r in rows],
        "order_p": observed_orders(sizes, [r["l2_p"] for r in rows]),
        "grids": rows,
        "scheme": (scheme or Scheme()).__dict__,
        "backend": backend,
        "config": dict(config or {}),
    }
