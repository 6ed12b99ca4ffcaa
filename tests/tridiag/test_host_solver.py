"""Stage 2's host solver (compiled C, OpenMP; or the LAPACK fallback) against LAPACK dgtsv."""

from __future__ import annotations

import numpy as np
import pytest

from launchtune.kernels.tridiag.host_solver import HostSolver
from launchtune.kernels.tridiag.partition import stage2
from launchtune.kernels.tridiag.system import ZeroPivotError, random_system


@pytest.mark.parametrize("n", [1, 2, 3, 17, 8191, 40_000, 300_001])
@pytest.mark.parametrize("threads", [1, 2, 5])
def test_matches_lapack(n, threads):
    iface = random_system(n, seed=n + threads)
    ref = stage2(iface.copy())
    x = HostSolver(n, threads).solve(iface)
    assert np.linalg.norm(x - ref) <= 1e-13 * np.linalg.norm(ref)


def test_zero_pivot():
    iface = random_system(50_000, seed=0)
    iface[1, 0] = 0.0
    iface[2, 0] = 0.0  # row 0 is all zero: singular
    with pytest.raises(ZeroPivotError):
        HostSolver(50_000, 3).solve(iface)
