"""Device-resident tridiagonal solve: launch by launch, as one CUDA graph, and cuSPARSE gtsv2_nopivot.

The system is already on the GPU and the answer stays there (``solve_device``). At 10^6 unknowns the solve is
nine small operations (flag reset, stage 1, two reduction levels, one PCR block, two back-substitutions, stage
3, the flag's 4-byte copy) of a few microseconds each, so the host's per-launch cost can sit between them;
replaying them as one captured CUDA graph (``DevicePartition.solve_graph``) removes it. Per size, R
interleaved rounds (every configuration once per round, the order rotated each round, CUDA events around each
call after a warm-up call; the wall time of the call up to its sync is kept beside it) of:

  plain_m10      ``DevicePartition.solve`` launch by launch, m = 10 (the previous session's measured path)
  graph_m{m}     the same solve replayed as one CUDA graph, m in ``--m`` (default 10, 16, 32)
  nopivot        cuSPARSE ``gtsv2_nopivot`` in place on a copy (inputs refreshed before each call, untimed)

Every configuration's answer is checked after timing: residual < 1e-12 on the device at every size, and up to
``--ref-max`` unknowns agreement with the numpy reference of the same m (``reference.solve``). Ratios (B / A,
per round) with a seeded bootstrap 95% interval of the median come from ``kernels.compare.compare``.

Writes ``ratios.csv`` (per size and comparison: ratio, interval, verdict, medians), ``repeats.csv`` (every
timed call), ``checks.csv`` (residuals and reference differences) and ``meta.json`` under --out;
prints a table.

    python -m lab.tridiag_device_graph --out $OUT
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.tridiag_ratio_tables import table
from benchmarks.tridiag_streams import run_meta
from launchtune.kernels.backend import get_backend
from launchtune.kernels.compare import compare
from launchtune.kernels.tridiag import reference
from launchtune.kernels.tridiag.system import random_system

SIZES = [100_000, 250_000, 500_000, 1_000_000, 2_500_000, 4_000_000, 10_000_000, 25_000_000]


def log(*args: object) -> None:
    print(*args, flush=True)


def timed(cp, stream, fn) -> tuple[float, float]:
    """(CUDA-event ms, wall ms up to the sync) of the work ``fn`` enqueues on ``stream``."""
    a, b = cp.cuda.Event(), cp.cuda.Event()
    t0 = time.perf_counter()
    a.record(stream)
    fn()
    b.record(stream)
    b.synchronize()
    wall = (time.perf_counter() - t0) * 1e3
    return float(cp.cuda.get_elapsed_time(a, b)), wall


def device_residual(cp, rows, x) -> float:
    a, b, c, d = rows
    if not bool(cp.isfinite(x).all()):
        return float("inf")
    r = b * x - d
    r[1:] += a[1:] * x[:-1]
    r[:-1] += c[:-1] * x[1:]
    return float(cp.linalg.norm(r) / cp.linalg.norm(d))


def measure(cp, n: int, ms: list[int], rounds: int, ref_max: int, seed: int) -> tuple[list, list, list]:
    from launchtune.kernels.tridiag.device_solver import DevicePartition
    from launchtune.kernels.tridiag.gtsv2 import DeviceGtsv

    abcd = random_system(n, seed=seed)
    a, b, c, d = (cp.asarray(r) for r in abcd)
    rows = (a, b, c, d)
    rows[0][0] = 0.0  # cuSPARSE reads a[0] and c[n-1]; ours ignores them
    rows[2][-1] = 0.0
    st = cp.cuda.Stream(non_blocking=True)
    calls: dict[str, Callable[[], object]] = {}
    outs: dict[str, tuple[Any, int, Any]] = {}
    solvers: dict[int, Any] = {}
    for m in sorted(set(ms) | {10}):
        solvers[m] = DevicePartition(cp, n, m, threads=256, resident=True)
    x_plain = cp.empty(n)
    dp10 = solvers[10]

    def plain() -> None:  # the same nine operations as the graph, the flag's copy included
        dp10.solve(rows, x_plain, st, check=False)
        dp10.fetch_flag(st)

    calls["plain_m10"] = plain
    outs["plain_m10"] = (x_plain, 10, dp10)
    for m in ms:
        x = cp.empty(n)
        dp = solvers[m]
        dp.graph(rows, x)  # capture outside the timed region

        def graph(dp: Any = dp, x: Any = x) -> None:
            dp.solve_graph(rows, x, st, check=False)

        calls[f"graph_m{m}"] = graph
        outs[f"graph_m{m}"] = (x, m, dp)
    g_rows = (a.copy(), b.copy(), c.copy(), d.copy())
    g = DeviceGtsv(cp, g_rows[0], g_rows[1], g_rows[2], g_rows[3], pivot=False, stream=st)

    def refresh() -> None:  # fresh inputs for the in-place cuSPARSE solve, enqueued before the timed region
        for src, dst in zip(rows, g_rows, strict=True):
            dst.data.copy_from_device_async(src.data, src.nbytes, st)

    names = [*calls, "nopivot"]

    def timer(f: Callable[[], object]) -> Callable[[], tuple[float, float]]:
        return lambda: timed(cp, st, f)

    def nopivot() -> tuple[float, float]:
        refresh()
        return timed(cp, st, g.run)

    timers = {k: timer(f) for k, f in calls.items()}
    timers["nopivot"] = nopivot
    for name in names:  # warm-up
        timers[name]()
    times: dict[str, list[float]] = {k: [] for k in names}
    repeats = []
    for r in range(rounds):
        rot = r % len(names)
        for name in names[rot:] + names[:rot]:
            ev, wall = timers[name]()
            times[name].append(ev)
            repeats.append({"size": n, "config": name, "round": r, "ms": ev, "wall_ms": wall})
    # correctness after timing: fresh solves, residual on the device, the numpy reference of the same m
    checks = []
    for name, (x, m, dp) in outs.items():
        x.fill(cp.nan)
        if name.startswith("graph"):
            dp.solve_graph(rows, x, st, check=True)
        else:
            dp.solve(rows, x, st, check=True)
        diff = float("nan")
        if n <= ref_max:
            ref = reference.solve(abcd, m=m, stage2="gpu")
            diff = float(np.linalg.norm(cp.asnumpy(x) - ref) / np.linalg.norm(ref))
        checks.append(
            {"size": n, "config": name, "m": m, "residual": device_residual(cp, rows, x), "ref_diff": diff}
        )
    refresh()
    g.run()
    st.synchronize()
    checks.append(
        {
            "size": n,
            "config": "nopivot",
            "m": "",
            "residual": device_residual(cp, rows, g_rows[3]),
            "ref_diff": "",
        }
    )
    # ratios: plain vs nopivot; every graph configuration vs the launch-by-launch solve and vs nopivot
    pairs = [("nopivot", "plain_m10")]
    pairs += [(base, f"graph_m{m}") for m in ms for base in ("plain_m10", "nopivot")]
    ratios = []
    for base, other in pairs:
        c = compare(times[base], times[other], seed=n % 100_003)
        ratios.append(
            {
                "size": n,
                "a": base,
                "b": other,
                "ratio": c.ratio,
                "low": c.low,
                "high": c.high,
                "verdict": c.verdict,
                "rounds": c.rounds,
                "a_ms": float(np.median(times[base])),
                "b_ms": float(np.median(times[other])),
                "a_wall_ms": float(np.median([t["wall_ms"] for t in repeats if t["config"] == base])),
                "b_wall_ms": float(np.median([t["wall_ms"] for t in repeats if t["config"] == other])),
            }
        )
    return ratios, repeats, checks


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    ap.add_argument("--m", default="10,16,32", help="sub-system sizes of the graph configurations")
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--ref-max", type=int, default=10**6, help="compare with the numpy reference up to here")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    backend = get_backend("cupy")
    cp = backend.xp
    meta = run_meta(backend, rounds=args.rounds, threads=256)
    log(json.dumps(meta["device"]))
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    ms = [int(m) for m in args.m.split(",")]
    ratios, repeats, checks = [], [], []
    t0 = time.perf_counter()
    for n in sizes:
        r, rep, chk = measure(cp, n, ms, args.rounds, args.ref_max, seed=n % 100_003)
        ratios += r
        repeats += rep
        checks += chk
        worst = max(float(c["residual"]) for c in chk)
        log(
            f"n={n:>11,} worst residual {worst:.1e}  "
            + "  ".join(f"{x['b']}/{x['a']} {x['ratio']:.3f}" for x in r)
        )
    meta["seconds"] = round(time.perf_counter() - t0, 1)
    (out / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    write_csv(out / "ratios.csv", ratios)
    write_csv(out / "repeats.csv", repeats)
    write_csv(out / "checks.csv", checks)
    log("\n" + table(out))  # the same table the data README pastes (benchmarks.tridiag_ratio_tables)
    bad = [c for c in checks if not float(c["residual"]) < 1e-12]
    bad += [c for c in checks if c["ref_diff"] != "" and float(c["ref_diff"]) > 1e-12]
    if bad:
        log(f"CHECK FAILED: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
