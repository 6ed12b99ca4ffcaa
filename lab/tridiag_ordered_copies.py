"""Host to host with stage 2 on the device: copies in order on one copy stream per direction, against the
per-chunk streams and the serial transfer floor, interleaved.

``copies="ordered"`` (``CudaPartitionSolver.set_copies``) issues every chunk's upload in order on one copy
stream (an event per chunk hands it to stage 1 on the compute stream) and every download in order on another;
``copies="streams"`` is the previous pipeline (chunk j's copies and kernels on stream j). Per size, R
interleaved rounds (every configuration once per round, the order rotated, CUDA events, after a warm-up
call of each) of:

  floor_copy     the serial transfer floor as copies: 32 B/unknown in as one copy, then 8 B/unknown out
  ordered_k      copies="ordered" with k chunks, k in 1, 2, 4, 8, 16, 32
  streams_k      copies="streams" with k chunks, k in 1, 4, 8

Ratios (per round, median, seeded bootstrap 95% interval, ``kernels.compare.compare``): every ordered_k over
floor_copy, and the best ordered_k over the best streams_k (best = lowest median). The serial floor from the
1 GiB pinned rates measured at the start (``tridiag_streams.bandwidths``) is given beside them (a constant, so
without an interval). Every configuration's answer is checked (residual < 1e-12) after timing.

Writes ``ratios.csv``, ``repeats.csv``, ``checks.csv`` and ``meta.json`` under --out and prints a table.

    python -m lab.tridiag_ordered_copies --out $OUT
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks.tridiag_ratio_tables import table
from benchmarks.tridiag_streams import bandwidths, run_meta, write_csv
from launchtune.kernels.backend import get_backend
from launchtune.kernels.compare import compare
from launchtune.kernels.tridiag.system import random_system, residual

SIZES = [1_000_000, 2_500_000, 4_000_000, 10_000_000, 25_000_000, 50_000_000]
ORDERED_K = (1, 2, 4, 8, 16, 32)
STREAMS_K = (1, 4, 8)


def log(*args: object) -> None:
    print(*args, flush=True)


def measure(cp, n: int, rounds: int, bw: dict) -> tuple[list, list, list]:
    from launchtune.kernels.tridiag.cuda_solver import CudaPartitionSolver, empty_pinned

    abcd = random_system(n, seed=n % 100_003, out=empty_pinned(cp, (4, n)))
    solver = CudaPartitionSolver(cp, abcd, m=10, threads=256, stage2="gpu")
    rt = cp.cuda.runtime
    fst = cp.cuda.Stream(non_blocking=True)
    dev_ptr, x_ptr = solver.dev.data.ptr, solver.x_host.ctypes.data

    def floor_copy() -> float:
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(fst)
        rt.memcpyAsync(dev_ptr, abcd.ctypes.data, 32 * n, rt.memcpyHostToDevice, fst.ptr)
        rt.memcpyAsync(x_ptr, dev_ptr + 24 * n, 8 * n, rt.memcpyDeviceToHost, fst.ptr)
        b.record(fst)
        b.synchronize()
        return float(cp.cuda.get_elapsed_time(a, b))

    def ours(copies: str, k: int):
        def run() -> float:
            solver.set_copies(copies)
            return float(solver.solve(k)["total"])

        return run

    calls = {"floor_copy": floor_copy}
    calls.update({f"ordered_{k}": ours("ordered", k) for k in ORDERED_K})
    calls.update({f"streams_{k}": ours("streams", k) for k in STREAMS_K})
    names = list(calls)
    for name in names:
        calls[name]()
    times: dict[str, list[float]] = {k: [] for k in names}
    repeats = []
    for r in range(rounds):
        rot = r % len(names)
        for name in names[rot:] + names[:rot]:
            ms = calls[name]()
            times[name].append(ms)
            repeats.append({"size": n, "config": name, "round": r, "ms": ms})
    checks = []
    for name in names[1:]:
        copies, k = name.split("_")
        solver.set_copies(copies)
        solver.x_host.fill(np.nan)
        solver.solve(int(k))
        checks.append({"size": n, "config": name, "residual": residual(abcd, np.array(solver.x_host))})
    serial = 32 * n / (bw["h2d_gbs"] * 1e6) + 8 * n / (bw["d2h_gbs"] * 1e6)  # ms
    med = {k: float(np.median(v)) for k, v in times.items()}
    best_o = min((k for k in names if k.startswith("ordered")), key=med.__getitem__)
    best_s = min((k for k in names if k.startswith("streams")), key=med.__getitem__)
    pairs = [("floor_copy", f"ordered_{k}") for k in ORDERED_K] + [(best_s, best_o)]
    ratios = []
    for a, b in pairs:
        c = compare(times[a], times[b], seed=n % 100_003)
        ratios.append(
            {
                "size": n,
                "a": a,
                "b": b,
                "ratio": c.ratio,
                "low": c.low,
                "high": c.high,
                "verdict": c.verdict,
                "rounds": c.rounds,
                "a_ms": med[a],
                "b_ms": med[b],
                "serial_floor_ms": serial,
                "b_over_serial_floor": med[b] / serial,
            }
        )
    return ratios, repeats, checks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    backend = get_backend("cupy")
    cp = backend.xp
    meta = run_meta(backend, rounds=args.rounds, m=10, threads=256)
    bw = bandwidths(cp)
    meta["bandwidth"] = bw
    log(json.dumps(meta["device"]), bw)
    ratios, repeats, checks = [], [], []
    t0 = time.perf_counter()
    for n in [int(float(s)) for s in args.sizes.split(",")]:
        r, rep, chk = measure(cp, n, args.rounds, bw)
        ratios += r
        repeats += rep
        checks += chk
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()
        log(f"n={n:>11,} worst residual {max(c['residual'] for c in chk):.1e}")
    meta["seconds"] = round(time.perf_counter() - t0, 1)
    (out / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    write_csv(out / "ratios.csv", ratios)
    write_csv(out / "repeats.csv", repeats)
    write_csv(out / "checks.csv", checks)
    log("\n" + table(out))  # the same table the data README pastes (benchmarks.tridiag_ratio_tables)
    bad = [c for c in checks if not c["residual"] < 1e-12]
    if bad:
        log(f"CHECK FAILED: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
