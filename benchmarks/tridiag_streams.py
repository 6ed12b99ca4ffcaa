"""Measure the tridiagonal partition solver on the GPU: every seed size x stage 2 x stream count, with
cuSPARSE and the transfer floor measured in the same run, interleaved.

One run does everything the stream models and the device pipelines need:
  * device provenance; pinned H2D / D2H bandwidth (1 GiB); tau, the cost of creating one CUDA stream;
  * for each size: residual (every configuration) and agreement with the numpy reference (up to 10^6) for
    stage 2 on the host and on the device at every stream count; the seven one-stream stage times of each;
    then R interleaved rounds (each round times every configuration once, in a fresh seeded order) of:
    ours host to host (stage2 host / gpu x 1..32 streams), cuSPARSE gtsv2 and gtsv2_nopivot with the same
    transfers, the serial transfer floor as a copy (32 B/unknown in, then 8 B/unknown out, one stream), and
    on device data (system already on the GPU, answer left there) ours against gtsv2 and gtsv2_nopivot;
  * m x streams and threads at 10^6, 10^7, 10^8 (stage 2 on the device); stage 2 alone, our reduced solver
    against gtsv2_nopivot on the same interface system; sizes past 10^8 (``--beyond``).
``--copies`` is the pipeline of every configuration with stage 2 on the device (the gpu_k rows, ``--tune``,
``--beyond``): ``streams`` (one stream per chunk, the seed's way) or ``spike`` (``CudaPartitionSolver``'s
SPIKE pipeline: uploads and downloads in order on one stream, the reductions and ways back beside them; equal
chunks, its ``ends`` stays 1). Stage 2 on the host has only ``streams``. The ``copies`` column says which ran;
a SPIKE row's seven one-stream stage times are the seed's stages mapped onto its traced chain
(``launchtune.kernels.tridiag.workload.spike_stage_times``: t1_d2h = t3_h2d = 0).
Per-round times let every ratio carry an interval: the median of the per-round ratios and a bootstrap 95%
interval of that median (paired, since one round times both sides within a few milliseconds).

Writes ``streams.csv`` (size x stage2 x streams), ``baselines.csv`` (per size), ``repeats.csv`` (every timed
call), ``tuning.csv``, ``stage2.csv`` (stage 2 alone, sizes beyond 10^8) and ``meta.json`` under --out.

    python -m benchmarks.tridiag_streams --out $OUT                  # the seed's 31 sizes
    python -m benchmarks.tridiag_streams --out $OUT --quick          # a few sizes, for a first check
    python -m benchmarks.tridiag_streams --out $OUT --copies spike --tune '' --stage2-sizes ''
                                                                     # the SPIKE pipeline's stream counts
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import run_main
from launchtune.kernels.backend import get_backend
from launchtune.kernels.compare import CONFIDENCE, compare
from launchtune.kernels.device import describe_device
from launchtune.kernels.tridiag import reference
from launchtune.kernels.tridiag.system import STAGE2_CHOICES, STREAM_CHOICES
from launchtune.kernels.tridiag.workload import STAGES, make_workload

REPO = Path(__file__).resolve().parents[1]


SEED_SIZES = sorted({int(round(f * 10**i)) for i in range(3, 8) for f in (1, 2.5, 4, 5, 7.5, 8)} | {10**8})
QUICK_SIZES = [1000, 10_007, 400_000, 4_000_000, 25_000_000]
REF_MAX = 10**6  # compare with the numpy reference up to here (the residual is checked at every size)
COPIES = ("streams", "spike")  # --copies: the pipelines of stage 2 on the device measured here


def copies_of(stage2: str, copies: str) -> str:
    """The pipeline a configuration runs: ``copies`` with stage 2 on the device, ``streams`` on the host (the
    other pipelines need the interface system on the device)."""
    return copies if stage2 == "gpu" else "streams"


def log(*args) -> None:
    print(*args, flush=True)


def run_meta(backend: Any, **extra: Any) -> dict:
    """The provenance every tridiagonal benchmark writes to ``meta.json``: interval confidence, device, date,
    command line, commit (``LAUNCHTUNE_COMMIT``, set by the GPU scripts), numpy and CuPy versions, then
    ``extra``."""
    return {
        "confidence": CONFIDENCE,
        "device": describe_device(backend),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "commit": os.environ.get("LAUNCHTUNE_COMMIT", ""),
        "numpy": np.__version__,
        "cupy": backend.xp.__version__,
        **extra,
    }


def bandwidths(cp) -> dict:
    """Pinned 1 GiB copies on a non-blocking stream, GB/s (median of 5 after a warm-up)."""
    from launchtune.kernels.tridiag.cuda_solver import empty_pinned

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
    from launchtune.kernels.tridiag.cuda_solver import empty_pinned

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


def interval(num: list[float], den: list[float], seed: int = 0) -> tuple[float, float, float]:
    """Median of the per-round ratios num/den and its 95% interval (paired rounds; ``kernels.compare``)."""
    try:
        c = compare(den, num, seed=seed)
    except ValueError:  # no finite round
        return (float("nan"),) * 3
    return c.ratio, c.low, c.high


class DeviceCheck:
    """The system's rows on the device, for residuals of 10^8-unknown answers in milliseconds, not seconds."""

    def __init__(self, cp, abcd: np.ndarray):
        self.cp = cp
        self.rows = tuple(cp.asarray(abcd[i]) for i in range(4))
        self.rows[0][0] = 0.0
        self.rows[2][-1] = 0.0
        self.norm_d = float(cp.linalg.norm(self.rows[3]))

    def residual(self, x) -> float:
        cp = self.cp
        a, b, c, d = self.rows
        x = cp.asarray(x)
        if not bool(cp.isfinite(x).all()):
            return float("inf")
        r = b * x - d
        r[1:] += a[1:] * x[:-1]
        r[:-1] += c[:-1] * x[1:]
        return float(cp.linalg.norm(r)) / (self.norm_d or 1.0)


def timed(cp, stream, fn) -> float:
    """Milliseconds of the work ``fn`` enqueues on ``stream`` (CUDA events around it)."""
    a, b = cp.cuda.Event(), cp.cuda.Event()
    a.record(stream)
    fn()
    b.record(stream)
    b.synchronize()
    return float(cp.cuda.get_elapsed_time(a, b))


def measure_size(
    cp, n: int, repeats: int, bw: dict, log_rows: list[dict], copies: str = "streams"
) -> tuple[list[dict], dict]:
    from launchtune.kernels.tridiag.device_solver import DevicePartition
    from launchtune.kernels.tridiag.gtsv2 import DeviceGtsv, GtsvBaseline, GtsvLimitError

    t0 = time.perf_counter()
    work = make_workload("random", n, "cupy", seed=n % 100_003)
    abcd = work.abcd
    chk = DeviceCheck(cp, abcd)
    ref = reference.solve(abcd, 10) if n <= REF_MAX else None
    stage_reps = max(3, repeats // 2)
    stages = {s2: work.stage_times(256, 10, stage_reps, s2, copies_of(s2, copies)) for s2 in STAGE2_CHOICES}
    solver = work.gpu_solver(256, 10, "gpu")
    checks = {}
    for s2 in STAGE2_CHOICES:
        for k in STREAM_CHOICES:
            x = work.solve(k, 256, 10, s2, copies_of(s2, copies))  # output poisoned with NaN first
            diff = float(np.linalg.norm(x - ref) / np.linalg.norm(ref)) if ref is not None else float("nan")
            checks[(s2, k)] = (chk.residual(x), diff)
    del x
    calls: dict[str, object] = {}
    spans: dict[str, list[dict]] = {}

    def ours(s2: str, k: int):
        def run() -> float:
            solver.set_stage2(s2)
            solver.set_copies(copies_of(s2, copies))
            t = solver.solve(k)
            spans.setdefault(f"{s2}_{k}", []).append(t)
            return t["total"]

        return run

    for s2 in STAGE2_CHOICES:
        for k in STREAM_CHOICES:
            calls[f"{s2}_{k}"] = ours(s2, k)
    base: dict = {"size": n}
    gt: dict[str, GtsvBaseline] = {}
    for pivot in (True, False):
        key = "gtsv2" if pivot else "gtsv2_nopivot"
        base.update({f"{key}_error": "", f"{key}_buffer_bytes": -1})
        try:
            gt[key] = GtsvBaseline(cp, abcd, pivot=pivot)
            base[f"{key}_buffer_bytes"] = gt[key].buffer_bytes
            base["gtsv2_via"] = gt[key].via
            calls[key] = gt[key].solve
        except GtsvLimitError as exc:  # cuSPARSE cannot do this size (10^8 on CUDA 13.2): say so, go on
            base[f"{key}_error"] = str(exc)
            log(f"n={n:>11,} {key} skipped: {exc}")
    # the serial transfer floor, as copies: the four rows in (one copy), then x out, one stream
    rt = cp.cuda.runtime
    fst = cp.cuda.Stream(non_blocking=True)
    dev_ptr, x_ptr = solver.dev.data.ptr, solver.x_host.ctypes.data

    def floor_copy() -> None:
        rt.memcpyAsync(dev_ptr, abcd.ctypes.data, 32 * n, rt.memcpyHostToDevice, fst.ptr)
        rt.memcpyAsync(x_ptr, dev_ptr + 24 * n, 8 * n, rt.memcpyDeviceToHost, fst.ptr)

    calls["floor_copy"] = lambda: timed(cp, fst, floor_copy)
    # device resident: the system already on the GPU, the answer left there
    dst = cp.cuda.Stream(non_blocking=True)
    a, b, c, d = chk.rows
    x_dev = cp.empty(n)
    dp = DevicePartition(cp, n, 10, resident=True)
    calls["dev_ours"] = lambda: timed(cp, dst, lambda: dp.solve((a, b, c, d), x_dev, dst, check=False))
    dgt: dict[str, tuple] = {}
    for pivot in (True, False):
        key = "dev_gtsv2" if pivot else "dev_gtsv2_nopivot"
        if ("gtsv2" if pivot else "gtsv2_nopivot") not in gt:
            continue
        rows = tuple(r.copy() for r in chk.rows)
        g = DeviceGtsv(cp, *rows, pivot=pivot, stream=dst)

        def run(g=g, rows=rows) -> float:
            for src, dstr in zip(chk.rows, rows, strict=True):  # fresh inputs, untimed
                dstr.data.copy_from_device_async(src.data, src.nbytes, dst)
            return timed(cp, dst, g.run)

        calls[key] = run
        dgt[key] = (g, rows)
    names = list(calls)
    times: dict[str, list[float]] = {k: [] for k in names}
    for name in names:  # warm-up (and a first call of every cuSPARSE path)
        calls[name]()
    spans.clear()
    # each round in a fresh seeded order: rotating one order (as before 2026-11-25) kept every configuration
    # behind the same one, and the one-chunk device solve, always right after the host stage's 32-stream solve
    # (whose OpenMP threads spin on; the likely cause, not verified), ran about 20 us slower: a false 1.3x
    # "best over one stream" below 10^4 unknowns (data/tridiag/h100/streams_spike/README.md)
    order = np.random.default_rng(n % 100_003)
    for r in range(repeats):
        for name in order.permutation(names):
            ms = calls[name]()
            times[name].append(ms)
            log_rows.append({"size": n, "config": name, "round": r, "ms": ms})
    # correctness of the device-resident answers and the baselines (after timing, fresh inputs)
    dp.solve((a, b, c, d), x_dev, dst, check=True)
    base["dev_ours_residual"] = chk.residual(x_dev)
    for key, (g, rows) in dgt.items():
        for src, dstr in zip(chk.rows, rows, strict=True):
            dstr.data.copy_from_device_async(src.data, src.nbytes, dst)
        g.run()
        dst.synchronize()
        base[f"{key}_residual"] = chk.residual(rows[3])
    for key, g in gt.items():
        g.solve()
        base[f"{key}_residual"] = chk.residual(g.x_host)
    rows_out = []
    for s2 in STAGE2_CHOICES:
        st = stages[s2]
        for k in STREAM_CHOICES:
            name = f"{s2}_{k}"
            tt = np.asarray(times[name])
            sp = spans[name]
            res, diff = checks[(s2, k)]
            rows_out.append(
                {
                    "size": n,
                    "stage2": s2,
                    "copies": copies_of(s2, copies),
                    "streams": k,
                    "threads": 256,
                    "m": 10,
                    "total_ms": float(np.median(tt)),
                    "total_min": float(tt.min()),
                    "total_max": float(tt.max()),
                    "total_q25": float(np.quantile(tt, 0.25)),
                    "total_q75": float(np.quantile(tt, 0.75)),
                    "stage1_span": float(np.median([t["stage1"] for t in sp])),
                    "host_span": float(np.median([t["stage2"] for t in sp])),
                    "stage3_span": float(np.median([t["stage3"] for t in sp])),
                    "host_span_max": float(max(t["stage2"] for t in sp)),
                    **{s: st[s] for s in STAGES},
                    "total_1stream": st["total"],
                    "host_threads": solver.host_solver.threads if s2 == "host" else 0,
                    "residual": res,
                    "ref_reldiff": diff,
                    "repeats": repeats,
                }
            )
    for key in ("gtsv2", "gtsv2_nopivot", "floor_copy", "dev_ours", "dev_gtsv2", "dev_gtsv2_nopivot"):
        tt = np.asarray(times.get(key, [np.nan]))
        base[f"{key}_ms"] = float(np.median(tt))
        base[f"{key}_min"] = float(np.min(tt))
        base[f"{key}_max"] = float(np.max(tt))
    base["floor_serial_ms"] = (32 * n / bw["h2d_gbs"] + 8 * n / bw["d2h_gbs"]) / 1e9 * 1e3
    base["floor_overlap_ms"] = 32 * n / (bw["h2d_gbs"] * 1e9) * 1e3
    for s2 in STAGE2_CHOICES:
        mine = [r for r in rows_out if r["stage2"] == s2]
        best = min(mine, key=lambda r: r["total_ms"])
        k = best["streams"]
        one, bestt = times[f"{s2}_1"], times[f"{s2}_{k}"]
        x, lo, hi = interval(one, bestt)
        base.update(
            {
                f"{s2}_best_streams": k,
                f"{s2}_best_ms": best["total_ms"],
                f"{s2}_one_stream_ms": mine[0]["total_ms"],
                f"{s2}_speedup": x,
                f"{s2}_speedup_lo": lo,
                f"{s2}_speedup_hi": hi,
            }
        )
        fl = times["floor_copy"]
        x, lo, hi = interval(bestt, fl)
        base.update({f"{s2}_over_copy": x, f"{s2}_over_copy_lo": lo, f"{s2}_over_copy_hi": hi})
        base[f"{s2}_over_floor"] = best["total_ms"] / base["floor_serial_ms"]
        if "gtsv2" in gt:
            x, lo, hi = interval(bestt, times["gtsv2"])
            base.update({f"{s2}_over_gtsv2": x, f"{s2}_over_gtsv2_lo": lo, f"{s2}_over_gtsv2_hi": hi})
    if "dev_gtsv2_nopivot" in times:
        x, lo, hi = interval(times["dev_ours"], times["dev_gtsv2_nopivot"])
        base.update({"dev_over_nopivot": x, "dev_over_nopivot_lo": lo, "dev_over_nopivot_hi": hi})
    base["seconds"] = time.perf_counter() - t0
    return rows_out, base


def tune_size(cp, n: int, repeats: int, copies: str = "streams") -> list[dict]:
    """m x streams and threads per block, stage 2 on the device, pipeline ``copies``; a failing point is
    recorded, not fatal."""
    from launchtune.kernels.tridiag.cuda_solver import max_threads

    out = []
    work = make_workload("random", n, "cupy", seed=n % 100_003)
    chk = DeviceCheck(cp, work.abcd)
    points = [(m, k, 256) for m in (8, 10, 16, 32) for k in (1, 4, 8, 16)]
    points += [(10, 8, th) for th in (64, 128, 512) if th <= max_threads(cp, 10)]
    for m, k, th in points:
        row = {"size": n, "stage2": "gpu", "copies": copies, "m": m, "streams": k, "threads": th}
        row.update(total_ms=float("nan"), total_min=float("nan"), residual=float("nan"), error="")
        try:
            config = {"streams": k, "threads": th, "m": m, "stage2": "gpu", "copies": copies}
            t = work.run(config, repeats=repeats)
            row.update(total_ms=t.total, total_min=t.extra["total_min"])
            row["residual"] = chk.residual(work.solve(k, th, m, "gpu", copies))
        except Exception as exc:  # keep measuring the rest; the reason lands in the CSV
            row["error"] = f"{type(exc).__name__}: {exc}"
        out.append(row)
        log(f"tune n={n:>11,} m={m:2d} k={k:2d} threads={th:4d} {row['total_ms']:9.3f} ms {row['error']}")
    del work, chk
    return out


def stage2_alternatives(cp, n: int, repeats: int) -> dict:
    """Stage 2 alone on the interface system of n unknowns (m = 10): ours and gtsv2_nopivot, interleaved."""
    from launchtune.kernels.tridiag.device_solver import DevicePartition
    from launchtune.kernels.tridiag.gtsv2 import DeviceGtsv

    abcd = cp.asarray(partition_rows(n))
    dp = DevicePartition(cp, n, 10)
    st = cp.cuda.Stream(non_blocking=True)
    rows = tuple(abcd[i] for i in range(4))
    dp.stage1(rows, 0, dp.p, st)
    st.synchronize()
    iface = dp.levels[0].copy()
    work_rows = tuple(iface[i].copy() for i in range(4))
    work_rows[0][0] = 0.0
    work_rows[2][-1] = 0.0
    g = DeviceGtsv(cp, *work_rows, pivot=False, stream=st)
    ours, theirs = [], []

    def run_ours() -> float:
        dp.levels[0].data.copy_from_device_async(iface.data, iface.nbytes, st)
        return timed(cp, st, lambda: dp.stage2(st))

    def run_theirs() -> float:
        work_rows[3].data.copy_from_device_async(iface[3].data, iface[3].nbytes, st)
        return timed(cp, st, g.run)

    run_ours(), run_theirs()
    for _ in range(repeats):
        ours.append(run_ours())
        theirs.append(run_theirs())
    z_ours = cp.asnumpy(dp.z)
    run_theirs()
    z_theirs = cp.asnumpy(work_rows[3])
    x, lo, hi = interval(ours, theirs)
    return {
        "kind": "stage2_alone",
        "size": n,
        "iface_unknowns": 2 * dp.p,
        "levels": "-".join(map(str, dp.sizes)),
        "ours_ms": float(np.median(ours)),
        "gtsv2_nopivot_ms": float(np.median(theirs)),
        "ratio": x,
        "ratio_lo": lo,
        "ratio_hi": hi,
        "reldiff": float(np.linalg.norm(z_ours - z_theirs) / np.linalg.norm(z_theirs)),
    }


def partition_rows(n: int) -> np.ndarray:
    from launchtune.kernels.tridiag.system import random_system

    return random_system(n, seed=n % 100_003)


def beyond(cp, n: int, repeats: int, bw: dict, copies: str = "streams") -> list[dict]:
    """A size past the seed's: stage 2 on the device (pipeline ``copies``) at a few stream counts, the floor
    copy, the residual."""
    out = []
    t0 = time.perf_counter()
    work = make_workload("random", n, "cupy", seed=n % 100_003)
    chk = DeviceCheck(cp, work.abcd)
    solver = work.gpu_solver(256, 10, "gpu", copies)
    for k in (1, 8, 16):
        x = work.solve(k, 256, 10, "gpu", copies)
        res = chk.residual(x)
        del x
        solver.solve(k)
        ts = [solver.solve(k)["total"] for _ in range(repeats)]
        out.append(
            {
                "kind": "beyond",
                "size": n,
                "copies": copies,
                "streams": k,
                "ours_ms": float(np.median(ts)),
                "residual": res,
            }
        )
    floor = (32 * n / bw["h2d_gbs"] + 8 * n / bw["d2h_gbs"]) / 1e9 * 1e3
    for row in out:
        row["floor_serial_ms"] = floor
        row["ratio"] = row["ours_ms"] / floor
        row["seconds"] = time.perf_counter() - t0
        log(
            f"beyond n={n:,} k={row['streams']} {row['ours_ms']:.2f} ms, floor {floor:.2f}, "
            f"residual {row['residual']:.1e}"
        )
    del work, chk, solver
    return out


def write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def _free(cp) -> None:
    import gc

    gc.collect()
    cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for the CSVs and meta.json")
    ap.add_argument("--quick", action="store_true", help="a few sizes only (first check on a new machine)")
    ap.add_argument("--sizes", help="comma-separated sizes instead of the seed's 31")
    ap.add_argument("--tune", default="1e6,1e7,1e8", help="sizes of the m x streams x threads grid ('' none)")
    ap.add_argument("--stage2-sizes", default="1e6,1e7,1e8", help="sizes of the stage-2-alone comparison")
    ap.add_argument("--beyond", default="", help="sizes past 10^8 to solve once (e.g. 2.5e8)")
    ap.add_argument("--repeats", type=float, default=1.0, help="scale the interleaved rounds (1 = 21/11/5)")
    ap.add_argument(
        "--copies",
        choices=COPIES,
        default="streams",
        help="pipeline of the configurations with stage 2 on the device: streams (one stream per chunk, the "
        "default) or spike (the SPIKE pipeline, equal chunks); stage 2 on the host is always streams",
    )
    return ap.parse_args(argv)


def main() -> int:
    args = parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    backend = get_backend("cupy")
    cp = backend.xp
    meta = run_meta(backend, copies=args.copies)
    log(json.dumps(meta["device"]))
    bw = bandwidths(cp)
    meta["bandwidth"] = bw
    meta["tau_ms"] = stream_tau(cp)
    from launchtune.kernels.tridiag.host_solver import default_threads, name
    from launchtune.kernels.tridiag.reduced import MR, PCR_MAX, max_unknowns

    meta["host_solver"] = {"name": name(), "threads": default_threads()}
    free, total = cp.cuda.runtime.memGetInfo()
    meta["memory"] = {
        "free_bytes": int(free),
        "total_bytes": int(total),
        "max_unknowns_host_to_host_m10": max_unknowns(int(free) - (256 << 20), 10),
        "max_unknowns_resident_m10": max_unknowns(int(free) - (256 << 20), 10, resident=True),
        "reduced_mr": MR,
        "pcr_max": PCR_MAX,
    }
    log(f"bandwidth {bw}  tau {meta['tau_ms']:.5f} ms  memory {meta['memory']}")
    (out / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    sizes = (
        [int(float(s)) for s in args.sizes.split(",")]
        if args.sizes
        else (QUICK_SIZES if args.quick else SEED_SIZES)
    )
    all_rows, bases, log_rows, tuning, extra = [], [], [], [], []
    t_start = time.perf_counter()
    for n in sizes:
        repeats = max(3, int(round((21 if n < 10**6 else 11 if n <= 10**7 else 5) * args.repeats)))
        try:
            rows, base = measure_size(cp, n, repeats, bw, log_rows, args.copies)
        except Exception as exc:  # one size failing must not lose the others: record and go on
            log(f"n={n:>11,} FAILED: {type(exc).__name__}: {exc}")
            bases.append({"size": n, "error": f"{type(exc).__name__}: {exc}"})
            _free(cp)
            continue
        all_rows += rows
        bases.append(base)
        worst = max(r["residual"] for r in rows)
        log(
            f"n={n:>11,} gpu ({args.copies}) k={base['gpu_best_streams']:2d} {base['gpu_best_ms']:9.3f} ms "
            f"(x{base['gpu_speedup']:.3f} over 1 stream) host k={base['host_best_streams']:2d} "
            f"{base['host_best_ms']:9.3f}  gtsv2 {base['gtsv2_ms']:9.3f}  "
            f"copy floor {base['floor_copy_ms']:9.3f}  "
            f"dev {base['dev_ours_ms']:.3f} vs nopivot {base['dev_gtsv2_nopivot_ms']:.3f}  worst residual "
            f"{worst:.1e}  [{time.perf_counter() - t_start:.0f} s]"
        )
        write_csv(out / "streams.csv", all_rows)
        write_csv(out / "baselines.csv", bases)
        write_csv(out / "repeats.csv", log_rows)
        _free(cp)
    for spec, fn in (
        (args.stage2_sizes, lambda n: [stage2_alternatives(cp, n, 11)]),
        (args.tune, lambda n: tuning.extend(tune_size(cp, n, 5, args.copies)) or []),
        (args.beyond, lambda n: beyond(cp, n, 3, bw, args.copies)),
    ):
        for s in filter(None, spec.split(",")):
            n = int(float(s))
            try:
                extra += fn(n)
            except Exception as exc:
                log(f"extra n={n:,} FAILED: {type(exc).__name__}: {exc}")
                extra.append({"kind": "error", "size": n, "error": f"{type(exc).__name__}: {exc}"})
            write_csv(out / "stage2.csv", extra)
            write_csv(out / "tuning.csv", tuning)
            _free(cp)
    for e in extra:
        if e["kind"] == "stage2_alone":
            log(
                f"stage 2 alone n={e['size']:,} ({e['levels']}): ours {e['ours_ms']:.4f} ms, gtsv2_nopivot "
                f"{e['gtsv2_nopivot_ms']:.4f} ms, ratio {e['ratio']:.3f} "
                f"[{e['ratio_lo']:.3f}, {e['ratio_hi']:.3f}]"
            )
    meta["seconds"] = time.perf_counter() - t_start
    (out / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    log(f"\nstage 2 on the device: copies {args.copies}")
    log(
        " size        | gpu k | T(1) -> T(best) ms  | x (90% CI)          | /copy floor | /gtsv2 "
        "| host best | dev ours / nopivot"
    )
    for b in bases:
        if "error" in b:
            log(f" {b['size']:>11,} | FAILED {b['error']}")
            continue
        log(
            f" {b['size']:>11,} | {b['gpu_best_streams']:5d} | "
            f"{b['gpu_one_stream_ms']:8.3f} -> {b['gpu_best_ms']:8.3f} | "
            f"{b['gpu_speedup']:.3f} [{b['gpu_speedup_lo']:.3f},{b['gpu_speedup_hi']:.3f}] | "
            f"{b['gpu_over_copy']:11.3f} | {b.get('gpu_over_gtsv2', float('nan')):6.3f} | "
            f"{b['host_best_ms']:9.3f} | {b['dev_ours_ms']:.3f} / {b['dev_gtsv2_nopivot_ms']:.3f}"
        )
    bad = [r for r in all_rows if not r["residual"] < 1e-12 or r["ref_reldiff"] > 1e-11]
    bad += [b for b in bases if "error" in b or not b.get("dev_ours_residual", 1) < 1e-12]
    bad += [e for e in extra if e["kind"] == "error" or e.get("residual", 0) >= 1e-12]
    log(f"checks: {len(all_rows)} (size, stage2, streams) rows; problems: {len(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    run_main(main)
