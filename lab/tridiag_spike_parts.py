"""Where the time between the last upload and the first download goes, host to host (issue 21).

Times each part of the ``copies="spike"`` and ``"streamed"`` pipelines alone, CUDA events, median of R
repeats after a warm-up, at each size and chunk count k: the k chunk uploads alone (in order on one stream,
2-D copies as the solver issues them), the k downloads alone, both (``copies_only``), one ``spike_reduce``
over the last chunk, ``spike_top``, one ``spike_back`` over the first chunk (also the kernel that reads and
writes every row directly, ``spike_back_first_plain``: without shared-memory staging), the streamed pipeline's
``stage1`` / ``reduce`` over the last chunk, ``solve_top``, ``back`` / ``stage3`` over the first, and each
whole solve; one single copy in, one out (``floor_copy``); and the spike solve's critical chain step by step
(``chain_at_*``: milliseconds from the start to the last upload, the last chunk's reduction, the top solve's
start and end, the first chunk's way back and its download).

    python -m lab.tridiag_spike_parts --out $OUT [--sizes 1e6,4e6] [--repeats 21] [--ends 0.5]

``--ends``: the first and last chunk's share of an inner one (``CudaPartitionSolver.set_ends``), for each part
and solve. ``uploads_rows`` is the uploads as four 1-D copies per chunk (one per row of a, b, c, d) instead
of one 2-D copy, to tell the copy engine's cost of a 2-D copy from the bytes.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.tridiag_streams import write_csv
from launchtune.kernels.backend import get_backend
from launchtune.kernels.tridiag.system import random_system

F8 = 8


def timed(cp: Any, st: Any, enqueue: Callable[[], object], repeats: int) -> float:
    """Median CUDA-event milliseconds of ``enqueue`` on ``st`` after one warm-up call."""
    enqueue()
    st.synchronize()
    out = []
    for _ in range(repeats):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(st)
        enqueue()
        b.record(st)
        b.synchronize()
        out.append(cp.cuda.get_elapsed_time(a, b))
    return float(np.median(out))


def parts(cp: Any, sv: Any, plain: Any, k: int) -> dict[str, Callable[[], object]]:
    """Each part of the pipelines for ``k`` chunks on slice edges, enqueued on the solver's main stream;
    ``plain``: a ``DevicePartition`` of the same size with ``staged=False``, for the spike way back that reads
    and writes rows directly (``spike_back_first_plain``)."""
    from launchtune.kernels.tridiag.reduced import SLICE

    rt, dp, st = cp.cuda.runtime, sv.dp, sv.main
    n8 = sv.n * F8
    host, dev = sv.host.ctypes.data, sv.dev.data.ptr
    xh, xd = sv.x_host.ctypes.data, dev + 3 * n8
    chunks = sv._plan(k, SLICE, sv.ends)
    first, last = chunks[0], chunks[-1]

    def up() -> None:
        for ch in chunks:
            off = ch.r0 * F8
            rt.memcpy2DAsync(dev + off, n8, host + off, n8, (ch.r1 - ch.r0) * F8, 4, 1, st.ptr)

    def up_rows() -> None:
        for ch in chunks:
            off = ch.r0 * F8
            for row in range(4):
                rt.memcpyAsync(dev + row * n8 + off, host + row * n8 + off, (ch.r1 - ch.r0) * F8, 1, st.ptr)

    def down() -> None:
        for ch in chunks:
            off = ch.r0 * F8
            rt.memcpyAsync(xh + off, xd + off, (ch.r1 - ch.r0) * F8, 2, st.ptr)

    return {
        "uploads": up,
        "uploads_rows": up_rows,
        "downloads": down,
        "copies_only": lambda: (up(), down()),
        "spike_reduce_last": lambda: dp.spike_reduce(sv.rows, last.s, last.e, st),
        "spike_top": lambda: dp.spike_top(st),
        "spike_back_first": lambda: dp.spike_back(sv.rows, first.s, first.e, sv.rows[3], st),
        "spike_back_first_plain": lambda: plain.spike_back(sv.rows, first.s, first.e, sv.rows[3], st),
        "stage1_last": lambda: dp.stage1(sv.rows, last.s, last.e, st),
        "reduce_last": lambda: dp.reduce(last.s, last.e, st),
        "solve_top": lambda: dp.solve_top(st),
        "back_first": lambda: dp.back(first.s, first.e, st),
        "stage3_first": lambda: dp.stage3(sv.rows, first.s, first.e, sv.rows[3], st),
    }


def measure(cp: Any, n: int, ks: list[int], repeats: int, ends: float = 1.0) -> list[dict]:
    from launchtune.kernels.tridiag.cuda_solver import CudaPartitionSolver, empty_pinned
    from launchtune.kernels.tridiag.device_solver import DevicePartition

    abcd = random_system(n, seed=n % 100_003, out=empty_pinned(cp, (4, n)))
    sv = CudaPartitionSolver(cp, abcd, m=10, threads=256, stage2="gpu")
    sv.set_ends(ends)
    plain = DevicePartition(cp, n, 10, 256, resident=False, check=False, staged=False)
    rt, st, n8 = cp.cuda.runtime, sv.main, n * F8

    def floor_copy() -> None:
        rt.memcpyAsync(sv.dev.data.ptr, abcd.ctypes.data, 4 * n8, rt.memcpyHostToDevice, st.ptr)
        rt.memcpyAsync(sv.x_host.ctypes.data, sv.dev.data.ptr + 3 * n8, n8, rt.memcpyDeviceToHost, st.ptr)

    rows = [{"size": n, "k": 1, "part": "floor_copy", "ms": timed(cp, st, floor_copy, repeats)}]
    for k in ks:
        sv.set_copies("spike")
        sv.solve(k)  # makes the spike buffers
        plain.spike_top(st)  # makes its spike buffers (their contents do not change the kernels' time)
        for name, enqueue in parts(cp, sv, plain, k).items():
            rows.append({"size": n, "k": k, "part": name, "ms": timed(cp, st, enqueue, repeats)})
        for copies in ("spike", "streamed"):
            sv.set_copies(copies)
            ms = timed(cp, st, lambda k=k: sv.solve(k), repeats)
            rows.append({"size": n, "k": k, "part": f"{copies}_solve", "ms": ms})
        sv.set_copies("spike")  # its critical chain, step by step
        sv.trace = True
        runs = [sv.solve(k) for _ in range(repeats + 1)][1:]
        sv.trace = False
        for key in [key for key in runs[0] if key.startswith("at_") or key == "total"]:
            ms = float(np.median([r[key] for r in runs]))
            rows.append({"size": n, "k": k, "part": f"chain_{key}", "ms": ms})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for parts.csv")
    ap.add_argument("--sizes", default="1e6,2.5e6,4e6", help="unknowns, comma separated")
    ap.add_argument("--chunks", default="1,2,4,8", help="chunk counts k, comma separated")
    ap.add_argument("--repeats", type=int, default=21, help="timed repeats per part (median)")
    ap.add_argument("--ends", type=float, default=1.0, help="end chunks' share of an inner one (default 1)")
    args = ap.parse_args()
    cp = get_backend("cupy").xp
    rows: list[dict] = []
    for n in [int(float(v)) for v in args.sizes.split(",")]:
        rows += measure(cp, n, [int(v) for v in args.chunks.split(",")], args.repeats, args.ends)
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "parts.csv", rows)
    (out / "parts.json").write_text(json.dumps(rows))
    print("| size | k | part | us |")
    for r in rows:
        print(f"| {r['size']:,} | {r['k']} | {r['part']} | {r['ms'] * 1000:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
