"""Baselines the partition solver is compared with: scipy's banded LAPACK solve on the CPU, cuSPARSE gtsv2."""

from __future__ import annotations

import time

import numpy as np
from scipy.linalg import solve_banded

from .system import to_banded


def cpu_banded(abcd: np.ndarray, repeats: int = 3) -> tuple[float, np.ndarray]:
    """Median milliseconds of ``scipy.linalg.solve_banded((1, 1), ...)`` (band storage built untimed)."""
    ab = to_banded(abcd)
    rhs = abcd[3]
    times, x = [], np.empty(0)
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        x = solve_banded((1, 1), ab, rhs, check_finite=False)
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times)), x
