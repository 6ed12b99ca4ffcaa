"""The whole partition method in numpy, the reference every device path is checked against: stage 1 on the
sub-systems in ``streams`` chunks, the interface system on the host (LAPACK, the seed's stage 2) or by the
device's algorithm (:mod:`launchtune.kernels.tridiag.reduced`), stage 3.

Its own module because the reduced solver is itself built from the partition stages
(:mod:`launchtune.kernels.tridiag.partition`): the stages sit below both.
"""

from __future__ import annotations

import numpy as np

from . import reduced
from .partition import padded_blocks, stage1, stage3
from .partition import (
    stage2 as stage2_host,
)  # the parameter `stage2` names the tunable
from .system import check_stage2, chunk_bounds


def solve(abcd: np.ndarray, m: int = 10, streams: int = 1, stage2: str = "host") -> np.ndarray:
    """Solve with the partition method on the host, sub-systems taken in ``streams`` chunks.

    ``stage2="host"`` solves the interface system with LAPACK (the seed's host stage); ``"gpu"`` with the
    device's algorithm in numpy (``reduced.solve_reduced``: partition levels, then PCR).
    """
    check_stage2(stage2)
    n = abcd.shape[1]
    blocks = padded_blocks(abcd, m)
    p = blocks.shape[1]
    chunks = chunk_bounds(p, streams)
    interface = np.empty((4, 2 * p))
    for s, e in chunks:
        interface[:, 2 * s : 2 * e] = stage1(blocks[:, s:e])
    z = reduced.solve_reduced(interface) if stage2 == "gpu" else stage2_host(interface)
    x = np.empty((p, m))
    for s, e in chunks:
        x[s:e] = stage3(blocks[:, s:e], z[2 * s : 2 * e])
    return x.reshape(-1)[:n]
