"""Measure the tridiagonal partition solver on the GPU: every seed size x stream count, baselines, floors.

One run does everything the stream model needs and the issue asks for:
  * device provenance; pinned H2D / D2H bandwidth (1 GiB); tau, the cost of creating one CUDA stream;
  * why CuPy's ``set``/``get`` showed no overlap: the same chunked copy-kernel-copy with
  ``get(blocking=True)``
    (CuPy's default), ``get(blocking=False)`` and raw ``memcpyAsync``;
  * for each size: residual and agreement with the numpy reference for every stream count, the seven
  one-stream
    stage times, the end-to-end time for 1..32 streams, cuSPARSE gtsv2 (pivoting and not) with the same
    transfers, scipy's solve_banded on the CPU, and the transfer floors;
  * a small grid over m and threads at the largest sizes.
Writes ``streams.csv`` (one row per size x streams), ``baselines.csv``, ``tuning.csv`` and ``meta.json`` under
--out, and prints a short table last.

    python benchmarks/tridiag_streams.py --out $OUT            # the seed's 31 sizes
    python benchmarks/tridiag_streams.py --out $OUT --quick    # a few sizes, for a first check
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernels.backend import get_backend  # noqa: E402
from kernels.device import describe_device  # noqa: E402
from kernels.tridiag import partition  # noqa: E402
from kernels.tridiag.baselines import cpu_banded  # noqa: E402
from kernels.tridiag.system import STREAM_CHOICES, residual  # noqa: E402
from kernels.tridiag.workload import STAGES, make_workload  # noqa: E402

SEED_SIZES = sorted({int(round(f * 10**i)) for i in range(3, 8) for f in (1, 2.5, 4, 5, 7.5, 8)} | {10**8})
QUICK_SIZES = [1000, 10_007, 400_000, 4_000_000, 25_000_000]


def log(*args) -> None:
    print(*args, flush=True)


def bandwidths(cp) -> dict:
    """Pinned 1 GiB copies on a non-blocking stream, GB/s (median of 5 after a warm-up)."""
    from kernels.tridiag.cuda_solver import empty_pinned

    nbytes = 1 << 30
    host = empty_pinned(cp, (nbytes // 8,))
    host[:] = 1.0
    dev = cp.empty(nbytes // 8)
    st = cp.cuda.Stream(non_blocking=True)
    rt = cp.cuda.runtime
    out = {}
    for name, kind, dst, src in (
        ("h2d", rt.memcpyHostToDevice, dev.data.ptr, host.ctypes.data),
        ("d2h", rt.memcpyDeviceToHost, host.ctypes.data, dev.data.ptr),
    ):
        times = []
        for _ in range(6):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record(st)
            rt.memcpyAsync(dst, src, nbytes, kind, st.ptr)
            b.record(st)
            b.synchronize()
            times.append(cp.cuda.get_elapsed_time(a, b))
        out[f"{name}_gbs"] = nbytes / (float(np.median(times[1:])) * 1e-3) / 1e9
    # both directions at once on two streams (do they overlap?)
    st2 = cp.cuda.Stream(non_blocking=True)
    half = nbytes // 2
    times = []
    for _ in range(6):
        a, b, c = cp.cuda.Event(), cp.cuda.Event(), cp.cuda.Event()
        a.record(st)
        st2.wait_event(a)
        rt.memcpyAsync(dev.data.ptr, host.ctypes.data, half, rt.memcpyHostToDevice, st.ptr)
        rt.memcpyAsync(host.ctypes.data + half, dev.data.ptr + half, half, rt.memcpyDeviceToHost, st2.ptr)
        c.record(st2)
        st.wait_event(c)
        b.record(st)
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b))
    out["bidir_512mib_each_ms"] = float(np.median(times[1:]))
    out["bidir_gbs_total"] = nbytes / (out["bidir_512mib_each_ms"] * 1e-3) / 1e9
    return out


def stream_tau(cp, count: int = 32, rounds: int = 20) -> float:
    """Milliseconds to create one non-blocking stream (host clock around creating ``count`` of them)."""
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        streams = [cp.cuda.Stream(non_blocking=True) for _ in range(count)]
        t1 = time.perf_counter()
        del streams
        times.append((t1 - t0) * 1e3 / count)
    return float(np.median(times))


def overlap_diagnostic(cp) -> list[dict]:
    """256 MiB in, x*2+1, 256 MiB out, chunked over k streams, three ways of copying."""
    from kernels.tridiag.cuda_solver import empty_pinned

    n = (256 << 20) // 8
    hin = empty_pinned(cp, (n,))
    hin[:] = np.arange(n, dtype=np.float64)
    hout = empty_pinned(cp, (n,))
    din, dout = cp.empty(n), cp.empty(n)
    rt = cp.cuda.runtime
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(32)]
    main = cp.cuda.Stream(non_blocking=True)
    kern = cp.ElementwiseKernel("float64 x", "float64 y", "y = 2.0 * x + 1.0", "twice_plus_one")
    rows = []
    for method in ("set_get_blocking", "set_get_nonblocking", "memcpyAsync"):
        for k in STREAM_CHOICES:
            edges = [round(j * n / k) for j in range(k + 1)]
            times = []
            for _ in range(4):
                hout[:] = -1.0
                start, stop = cp.cuda.Event(), cp.cuda.Event()
                start.record(main)
                for st in streams[:k]:
                    st.wait_event(start)
                for j, st in enumerate(streams[:k]):
                    s, e = edges[j], edges[j + 1]
                    if method == "memcpyAsync":
                        rt.memcpyAsync(
                            din.data.ptr + 8 * s,
                            hin.ctypes.data + 8 * s,
                            8 * (e - s),
                            rt.memcpyHostToDevice,
                            st.ptr,
                        )
                    else:
                        din[s:e].set(hin[s:e], stream=st)
                    with st:
                        kern(din[s:e], dout[s:e])
                    if method == "memcpyAsync":
                        rt.memcpyAsync(
                            hout.ctypes.data + 8 * s,
                            dout.data.ptr + 8 * s,
                            8 * (e - s),
                            rt.memcpyDeviceToHost,
                            st.ptr,
                        )
                    else:
                        dout[s:e].get(stream=st, out=hout[s:e], blocking=method == "set_get_blocking")
                    ev = cp.cuda.Event(disable_timing=True)
                    ev.record(st)
                    main.wait_event(ev)
                stop.record(main)
                stop.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, stop))
            ok = bool(hout[0] == 1.0 and hout[-1] == 2.0 * (n - 1) + 1.0)
            rows.append({"method": method, "streams": k, "ms": float(np.median(times[1:])), "correct": ok})
    return rows


def measure_size(cp, n: int, repeats: int, bw: dict, check_ref: bool) -> tuple[list[dict], dict]:
    from kernels.tridiag.gtsv2 import GtsvBaseline, GtsvLimitError

    work = make_workload("random", n, "cupy", seed=n % 100_003)
    ref = partition.solve(work.abcd, 10) if check_ref else None
    stages = work.stage_times(256, 10, repeats)
    rows = []
    for k in STREAM_CHOICES:
        x = work.solve(k, 256, 10)  # output poisoned with NaN first
        res = residual(work.abcd, x) if np.all(np.isfinite(x)) else float("inf")
        diff = float(np.linalg.norm(x - ref) / np.linalg.norm(ref)) if ref is not None else float("nan")
        t = work.run({"streams": k, "threads": 256, "m": 10}, repeats=repeats)
        rows.append(
            {
                "size": n,
                "streams": k,
                "threads": 256,
                "m": 10,
                "total_ms": t.total,
                "stage1_span": t.extra["stage1_span"],
                "host_span": t.extra["host_span"],
                "stage3_span": t.extra["stage3_span"],
                **{s: stages[s] for s in STAGES},
                "total_1stream": stages["total"],
                "total_min": t.extra["total_min"],
                "total_max": t.extra["total_max"],
                "host_span_max": t.extra["host_span_max"],
                "host_threads": t.extra["host_threads"],
                "residual": res,
                "ref_reldiff": diff,
                "repeats": repeats,
            }
        )
    base: dict = {"size": n}
    for pivot in (True, False):
        key = "gtsv2" if pivot else "gtsv2_nopivot"
        base.update({f"{key}_ms": float("nan"), f"{key}_residual": float("nan")})
        try:
            g = GtsvBaseline(cp, work.abcd, pivot=pivot)
        except GtsvLimitError as exc:  # cuSPARSE cannot do this size (10^8 on CUDA 13.2): say so, go on
            base[f"{key}_buffer_bytes"] = -1
            base[f"{key}_error"] = str(exc)
            log(f"n={n:>11,} {key} skipped: {exc}")
            continue
        g.solve()
        ts = [g.solve() for _ in range(repeats)]
        base[f"{key}_ms"] = float(np.median(ts))
        base[f"{key}_residual"] = residual(work.abcd, np.array(g.x_host))
        base[f"{key}_buffer_bytes"] = g.buffer_bytes
        base[f"{key}_error"] = ""
        base["gtsv2_via"] = g.via
        del g
    base.setdefault("gtsv2_via", "")
    base["cpu_banded_ms"] = cpu_banded(work.abcd, repeats=1 if n >= 10**7 else 3)[0]
    base["floor_overlap_ms"] = 32 * n / (bw["h2d_gbs"] * 1e9) * 1e3  # 32 B/unknown in, the 8 out overlapped
    base["floor_serial_ms"] = (32 * n / bw["h2d_gbs"] + 8 * n / bw["d2h_gbs"]) / 1e9 * 1e3
    best = min(rows, key=lambda r: r["total_ms"])
    base.update(best_streams=best["streams"], best_ms=best["total_ms"], one_stream_ms=rows[0]["total_ms"])
    tuning = []
    if n in (10**6, 10**7, 10**8):
        tuning += tune_size(cp, work, n, max(3, repeats // 2))
    del work
    return rows, {**base, "_tuning": tuning}


def tune_size(cp, work, n: int, repeats: int) -> list[dict]:
    """m x streams, threads per block, host solver threads; a failing point is recorded, not fatal."""
    from kernels.tridiag.cuda_solver import max_threads

    out = []

    def point(kind: str, config: dict, host_threads: int | None = None) -> None:
        row = {
            "size": n,
            "kind": kind,
            **config,
            "host_threads": host_threads,
            "total_ms": float("nan"),
            "t2_host": float("nan"),
            "host_span_max": float("nan"),
            "residual": float("nan"),
            "error": "",
        }
        try:
            if host_threads is not None:
                work._gpu(config["threads"], config["m"]).host_solver.threads = host_threads
                work._stage_cache.clear()
            t = work.run(config, repeats=repeats)
            row.update(
                total_ms=t.total,
                t2_host=t.kernels["t2_host"],
                host_span_max=t.extra["host_span_max"],
                host_threads=t.extra["host_threads"],
            )
            row["residual"] = residual(
                work.abcd, work.solve(config["streams"], config["threads"], config["m"])
            )
        except Exception as exc:  # keep measuring the rest; the reason lands in the CSV
            row["error"] = f"{type(exc).__name__}: {exc}"
        out.append(row)

    from kernels.tridiag.host_solver import default_threads

    for ht in (1, 4, 8, 16):
        point("host_threads", {"streams": 1, "threads": 256, "m": 10}, ht)
    point("host_threads", {"streams": 1, "threads": 256, "m": 10}, default_threads())
    for m in (4, 10, 16, 32):
        for k in (1, 8, 32):
            point("m_streams", {"streams": k, "threads": 256, "m": m})
    for th in (64, 128, 512, 1024):
        if th <= max_threads(cp, 10):
            point("threads", {"streams": 8, "threads": th, "m": 10})
    work._stage_cache.clear()
    return out


def write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--out", required=True, help="folder for streams.csv, baselines.csv, tuning.csv, meta.json"
    )
    ap.add_argument("--quick", action="store_true", help="a few sizes only (first check on a new machine)")
    ap.add_argument("--sizes", help="comma-separated sizes instead of the seed's 31")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    backend = get_backend("cupy")
    cp = backend.xp
    meta = {
        "device": describe_device(backend),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "numpy": np.__version__,
    }
    log(json.dumps(meta["device"]))
    bw = bandwidths(cp)
    meta["bandwidth"] = bw
    meta["tau_ms"] = stream_tau(cp)
    from kernels.tridiag.host_solver import default_threads, name

    meta["host_solver"] = {"name": name(), "threads": default_threads()}
    log(f"bandwidth {bw}  tau {meta['tau_ms']:.5f} ms")
    meta["overlap"] = overlap_diagnostic(cp)
    (out / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    for r in meta["overlap"]:
        log(f"overlap {r['method']:20s} k={r['streams']:2d} {r['ms']:8.3f} ms correct={r['correct']}")
    sizes = (
        [int(float(s)) for s in args.sizes.split(",")]
        if args.sizes
        else (QUICK_SIZES if args.quick else SEED_SIZES)
    )
    all_rows, bases, tuning = [], [], []
    t_start = time.perf_counter()
    for n in sizes:
        repeats = 21 if n < 10**6 else 11 if n <= 10**7 else 5
        rows, base = measure_size(cp, n, repeats, bw, check_ref=n <= 10**7)
        tuning += base.pop("_tuning")
        all_rows += rows
        bases.append(base)
        worst = max(r["residual"] for r in rows)
        log(
            f"n={n:>11,} best k={base['best_streams']:2d} {base['best_ms']:9.3f} ms  1 stream "
            f"{base['one_stream_ms']:9.3f}  gtsv2 {base['gtsv2_ms']:9.3f}  worst residual {worst:.1e}  "
            f"[{time.perf_counter() - t_start:.0f} s]"
        )
        write_csv(out / "streams.csv", all_rows)
        write_csv(out / "baselines.csv", bases)
        write_csv(out / "tuning.csv", tuning)
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()
    (out / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    for t in tuning:
        log(
            f"tune n={t['size']:>11,} m={t['m']:2d} threads={t['threads']:4d} k={t['streams']:2d} "
            f"{t['total_ms']:9.3f} ms (host {t['t2_host']:.2f})"
        )
    log(
        "\n size        | best k | T(1) ms   | T(best) ms | speed-up | gtsv2 ms  | best/gtsv2 | floor ms "
        "| best/floor"
        "| max resid"
    )
    for b in bases:
        worst = max(r["residual"] for r in all_rows if r["size"] == b["size"])
        log(
            f" {b['size']:>11,} | {b['best_streams']:6d} | {b['one_stream_ms']:9.3f} | "
            f"{b['best_ms']:10.3f} | "
            f"{b['one_stream_ms'] / b['best_ms']:8.3f} | {b['gtsv2_ms']:9.3f} | "
            f"{b['best_ms'] / b['gtsv2_ms']:10.3f} |"
            f" {b['floor_overlap_ms']:8.3f} | {b['best_ms'] / b['floor_overlap_ms']:9.2f} | {worst:.1e}"
        )
    bad = [r for r in all_rows if not r["residual"] < 1e-12 or r["ref_reldiff"] > 1e-11]
    log(
        f"checks: {len(all_rows) - len(bad)}/{len(all_rows)} (size, streams) pass residual < 1e-12 "
        "and the reference"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
