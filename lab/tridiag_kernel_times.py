"""Kernel durations of one host-to-host solve per pipeline, for Nsight Compute (issue 21).

Solves one random system with ``copies="spike"`` and ``"streamed"`` (k chunks), after a warm-up solve of each
that is outside the profiled range (``cudaProfilerStart``/``Stop``), so that

    ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \\
        python3 -m lab.tridiag_kernel_times --size 1e6 --chunks 4 > kernels.csv

lists the device time of every kernel of the two solves alone, without the host's launch cost that a
CUDA-event timing of one launch includes.
"""

from __future__ import annotations

import argparse

from launchtune.kernels.backend import get_backend
from launchtune.kernels.tridiag.system import random_system


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1e6", help="unknowns (default 1e6)")
    ap.add_argument("--chunks", type=int, default=4, help="chunk count k (default 4)")
    args = ap.parse_args()
    from launchtune.kernels.tridiag.cuda_solver import CudaPartitionSolver, empty_pinned

    cp = get_backend("cupy").xp
    n = int(float(args.size))
    abcd = random_system(n, seed=n % 100_003, out=empty_pinned(cp, (4, n)))
    sv = CudaPartitionSolver(cp, abcd, m=10, threads=256, stage2="gpu")
    for copies in ("spike", "streamed"):
        sv.set_copies(copies)
        sv.solve(args.chunks)
    cp.cuda.runtime.profilerStart()
    for copies in ("spike", "streamed"):
        sv.set_copies(copies)
        sv.solve(args.chunks)
    cp.cuda.runtime.profilerStop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
