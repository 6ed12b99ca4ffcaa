"""Host to host with stage 2 reduced chunk by chunk ("streamed") and shared-memory staged reduced levels,
against the previous ordered pipeline, cuSPARSE ``gtsv2`` with the same transfers and the serial transfer
floor, interleaved.

What changed and why it is timed this way: after the last upload the previous pipeline ran the whole of
stage 2 (every reduction level over the whole interface system, the PCR block, every back-substitution) before
the first chunk's stage 3 and download could start. ``copies="streamed"`` reduces each chunk's interface rows
through every level as soon as its stage 1 is done (while the next chunk uploads), so after the last upload
only the last chunk's levels, the PCR block and the first chunk's back-substitution are left before the first
download; the staged kernels (``stage1_rs``/``stage3_rs``) shorten each level's chain of memory latencies.

Per size, R interleaved rounds (every configuration once per round, the order rotated, CUDA events, after a
warm-up call of each) of:

  floor_copy          32 B/unknown in as one copy, then 8 B/unknown out, one stream
  gtsv2               cuSPARSE gtsv2 with the same transfers
  ordered_plain_k     copies="ordered", reduced levels read from global memory (the pipeline measured before)
  ordered_k           copies="ordered", staged reduced levels
  streamed_k          copies="streamed", staged reduced levels
  spike_k             copies="spike": SPIKE slices of 512 sub-systems (stage 1 and the slice's interface block
                      in one kernel per chunk, a top system of two rows per slice, one kernel per chunk back)
  spike_plain_k       spike_k with kernels that read and write every row directly (staged=False: no
                      shared-memory staging in the way back, spike_back, or in the reduced levels)
  spike<s>_k          the same with slices of s sub-systems (--slices), k = 2, 4, 8
  spike_e<pct>_k      spike_k with the first and the last chunk pct% of an inner one (--ends), k = 4, 8, 16

and, on the device alone, stage 2 (every level and the PCR block) with the plain and the staged kernels
(``stage2_plain``, ``stage2_staged``). Ratios (median of per-round ratios, seeded bootstrap 95% interval,
``kernels.compare.compare``): every host-to-host configuration over floor_copy; the best streamed_k over the
best ordered_plain_k and over gtsv2; the best spike_k over the best streamed_k, over gtsv2 and over the best
spike_plain_k, the best spike<s>_k over the best spike_k; stage2_staged
over stage2_plain. The serial floor (inputs in at the measured H2D rate, then the solution out at
the measured D2H rate) is measured in every round too: one 256 MiB pinned copy each way (``serial_floor``),
and each host-to-host configuration's per-round ratio to it gets its own interval (``b_over_serial_floor``,
``floor_low``, ``floor_high``; "within 1.05x" where the whole interval is).
Every configuration's answer is checked after timing (residual < 1e-12; the staged and streamed answers
against the plain pipeline's, bit for bit; every answer's relative difference to the plain pipeline's).

    python -m benchmarks.tridiag_streamed --out $OUT [--sizes 1e6,1e7] [--rounds 21] [--slices 256,128]
                                         [--ends 0.5,0.25]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks import run_main
from benchmarks.tridiag_ratio_tables import table
from benchmarks.tridiag_streams import bandwidths, run_meta, timed, write_csv
from launchtune.kernels.backend import get_backend
from launchtune.kernels.compare import compare
from launchtune.kernels.tridiag.system import random_system, residual

SIZES = [1_000_000, 2_500_000, 4_000_000, 10_000_000, 25_000_000, 50_000_000]
PLAIN_K = (4, 8)
ORDERED_K = (4, 8)
STREAMED_K = (4, 8, 16)
SPIKE_K = (1, 2, 4, 8, 16)
SLICE_K = (2, 4, 8)  # chunk counts of spike<size>_k, for each --slices size
ENDS_K = (4, 8, 16)  # chunk counts of spike_e<pct>_k, for each --ends share (end chunks need 3 or more)


def ends_tag(share: float) -> str:
    """The name of the spike configurations with end chunks ``share`` of an inner one: 0.25 -> spike_e25."""
    return f"spike_e{round(share * 100)}"


def log(*args: object) -> None:
    print(*args, flush=True)


PROBE_BYTES = 256 << 20  # the rate probe of every round: one 256 MiB pinned copy each way


class RateProbe:
    """Pinned host and device buffers for one large copy each way, timed once per round: the serial floor of
    a size in that round is its 32 B/unknown at that round's H2D rate, then 8 B/unknown at its D2H rate."""

    def __init__(self, cp) -> None:
        from launchtune.kernels.tridiag.cuda_solver import empty_pinned

        self.cp, self.rt = cp, cp.cuda.runtime
        self.host = empty_pinned(cp, (PROBE_BYTES // 8,))
        self.host[:] = 1.0
        self.dev = cp.empty(PROBE_BYTES // 8)
        self.stream = cp.cuda.Stream(non_blocking=True)

    def rates(self) -> tuple[float, float]:
        """(H2D, D2H) bytes per millisecond now."""
        h2d, d2h = self.rt.memcpyHostToDevice, self.rt.memcpyDeviceToHost
        host, dev = self.host.ctypes.data, self.dev.data.ptr
        up = timed(self.cp, self.stream, lambda: self._copy(dev, host, h2d))
        down = timed(self.cp, self.stream, lambda: self._copy(host, dev, d2h))
        return PROBE_BYTES / up, PROBE_BYTES / down

    def _copy(self, dst: int, src: int, kind: int) -> None:
        self.rt.memcpyAsync(dst, src, PROBE_BYTES, kind, self.stream.ptr)


def measure(
    cp, n: int, rounds: int, probe: RateProbe, slices: tuple[int, ...] = (), ends: tuple[float, ...] = ()
) -> tuple[list, list, list]:
    from launchtune.kernels.tridiag.cuda_solver import CudaPartitionSolver, empty_pinned
    from launchtune.kernels.tridiag.gtsv2 import GtsvBaseline

    abcd = random_system(n, seed=n % 100_003, out=empty_pinned(cp, (4, n)))
    plain = CudaPartitionSolver(cp, abcd, m=10, threads=256, stage2="gpu", staged=False)
    staged = CudaPartitionSolver(cp, abcd, m=10, threads=256, stage2="gpu", staged=True)
    sliced = {s: CudaPartitionSolver(cp, abcd, m=10, threads=256, stage2="gpu", slice_size=s) for s in slices}
    gtsv = GtsvBaseline(cp, abcd, pivot=True)
    rt = cp.cuda.runtime
    fst = cp.cuda.Stream(non_blocking=True)
    dev_ptr, x_ptr = staged.dev.data.ptr, staged.x_host.ctypes.data

    def floor_copy() -> None:
        rt.memcpyAsync(dev_ptr, abcd.ctypes.data, 32 * n, rt.memcpyHostToDevice, fst.ptr)
        rt.memcpyAsync(x_ptr, dev_ptr + 24 * n, 8 * n, rt.memcpyDeviceToHost, fst.ptr)

    calls = {"floor_copy": lambda: timed(cp, fst, floor_copy), "gtsv2": gtsv.solve}
    setups: dict[str, tuple] = {}  # a host-to-host configuration of ours -> (solver, copies, k, ends)

    def ours(name: str, solver, copies: str, k: int, share: float = 1.0) -> None:
        setups[name] = (solver, copies, k, share)

        def run() -> float:
            solver.set_copies(copies)
            solver.set_ends(share)
            return float(solver.solve(k)["total"])

        calls[name] = run

    # stage 2 alone on the device starts from the interface system of a fresh stage 1 (saved once; stage 2
    # solves it in place, so each call restores it first, outside the timed region)
    saved: dict[int, list] = {}

    def stage2(solver):
        dp = solver.dp

        def run() -> float:
            for lv, keep in zip(dp.levels, saved[id(dp)], strict=True):
                lv[...] = keep
            cp.cuda.Device().synchronize()
            return timed(cp, solver.main, lambda: dp.stage2(solver.main))

        return run

    for k in PLAIN_K:
        ours(f"ordered_plain_{k}", plain, "ordered", k)
    for k in ORDERED_K:
        ours(f"ordered_{k}", staged, "ordered", k)
    for k in STREAMED_K:
        ours(f"streamed_{k}", staged, "streamed", k)
    for k in SPIKE_K:
        ours(f"spike_{k}", staged, "spike", k)
        ours(f"spike_plain_{k}", plain, "spike", k)
    for size in slices:
        for k in SLICE_K:
            ours(f"spike{size}_{k}", sliced[size], "spike", k)
    for share in ends:
        for k in ENDS_K:
            ours(f"{ends_tag(share)}_{k}", staged, "spike", k, share)
    host_to_host = [k for k in calls if k != "floor_copy"]
    for name in list(calls):
        calls[name]()
    for s in (plain, staged):  # x was written over the device's d: upload the system again first
        s.dev.set(np.ascontiguousarray(abcd))
        cp.cuda.Device().synchronize()  # set() may return before the copy is done; main does not wait for it
        s.dp.stage1(s.rows, 0, s.p, s.main)
        s.main.synchronize()
        saved[id(s.dp)] = [lv.copy() for lv in s.dp.levels]
    calls["stage2_plain"] = stage2(plain)
    calls["stage2_staged"] = stage2(staged)
    calls["stage2_plain"]()
    calls["stage2_staged"]()
    z_plain = plain.dp.levels[0][3].get()
    z_staged = staged.dp.levels[0][3].get()
    names = list(calls)
    floor_of_round: list[float] = []  # the serial floor at each round's measured rates (ms)

    def serial_floor() -> float:
        h2d, d2h = probe.rates()
        floor_of_round.append(32 * n / h2d + 8 * n / d2h)
        return floor_of_round[-1]

    calls["serial_floor"] = serial_floor
    names = list(calls)
    times: dict[str, list[float]] = {k: [] for k in names}
    repeats = []
    for r in range(rounds):
        rot = r % len(names)
        for name in names[rot:] + names[:rot]:
            ms = calls[name]()
            times[name].append(ms)
            repeats.append({"size": n, "config": name, "round": r, "ms": ms})
    same_z = bool(np.array_equal(z_plain, z_staged))
    checks = [{"size": n, "config": "stage2", "residual": "", "bitwise_vs_plain": same_z, "rel_diff": ""}]
    plain.set_copies("ordered")
    plain.solve(4)
    x_ref = np.array(plain.x_host)
    answers: dict[str, np.ndarray] = {}
    for name in host_to_host:
        if name == "gtsv2":
            gtsv.solve()
            x = np.array(gtsv.x_host)
            same: bool | str = ""
        else:
            solver, copies, k, share = setups[name]
            solver.set_copies(copies)
            solver.set_ends(share)
            solver.x_host.fill(np.nan)
            solver.solve(k)
            x = np.array(solver.x_host)
            same = bool(np.array_equal(x, x_ref))
        diff = float(np.linalg.norm(x - x_ref) / np.linalg.norm(x_ref))
        res = residual(abcd, x)
        row = {"size": n, "config": name, "residual": res, "bitwise_vs_plain": same, "rel_diff": diff}
        checks.append(row)
        answers[name] = x
    for k in SPIKE_K:  # the staged way back does the direct one's arithmetic: the same bits
        same = bool(np.array_equal(answers[f"spike_{k}"], answers[f"spike_plain_{k}"]))
        checks.append(
            {
                "size": n,
                "config": f"spike_{k}=spike_plain_{k}",
                "residual": "",
                "bitwise_vs_plain": same,
                "rel_diff": "",
            }
        )
    med = {k: float(np.median(v)) for k, v in times.items()}

    def best(prefix: str) -> str:
        return min((k for k in names if k.rsplit("_", 1)[0] == prefix), key=med.__getitem__)

    pairs = [("floor_copy", k) for k in host_to_host]
    pairs += [(best("ordered_plain"), best("streamed")), ("gtsv2", best("streamed"))]
    pairs += [
        (best("streamed"), best("spike")),
        ("gtsv2", best("spike")),
        (best("spike_plain"), best("spike")),
    ]
    pairs += [(best("spike"), best(f"spike{size}")) for size in slices]
    pairs += [(best("spike"), best(ends_tag(share))) for share in ends]
    pairs += [("stage2_plain", "stage2_staged")]
    ratios = []
    for a, b in pairs:
        c = compare(times[a], times[b], seed=n % 100_003)
        on_floor = b not in ("stage2_staged",)
        f = compare(times["serial_floor"], times[b], seed=n % 100_003) if on_floor else None
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
                "serial_floor_ms": med["serial_floor"],
                "b_over_serial_floor": f.ratio if f else "",
                "floor_low": f.low if f else "",
                "floor_high": f.high if f else "",
                "floor_verdict": ("within 1.05x" if f.high <= 1.05 else "not within 1.05x") if f else "",
            }
        )
    return ratios, repeats, checks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for ratios.csv, repeats.csv, checks.csv, meta.json")
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="unknowns, comma separated")
    ap.add_argument("--rounds", type=int, default=21, help="interleaved rounds per size (default 21)")
    ap.add_argument(
        "--slices", default="", help="other SPIKE slice sizes to time beside 512, comma separated (256,128)"
    )
    ap.add_argument(
        "--ends",
        default="",
        help="shares of an inner chunk for the first and last chunk to time beside equal chunks (0.5,0.25)",
    )
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    backend = get_backend("cupy")
    cp = backend.xp
    meta = run_meta(backend, rounds=args.rounds, slices=args.slices, ends=args.ends, m=10, threads=256)
    bw = bandwidths(cp)
    meta["bandwidth"] = bw  # 1 GiB rates at the start, for reference; each round probes its own (RateProbe)
    meta["probe_bytes"] = PROBE_BYTES
    log(json.dumps(meta["device"]), bw)
    probe = RateProbe(cp)
    ratios, repeats, checks = [], [], []
    t0 = time.perf_counter()
    for n in [int(float(s)) for s in args.sizes.split(",")]:
        slices = tuple(int(v) for v in args.slices.split(",") if v)
        ends = tuple(float(v) for v in args.ends.split(",") if v)
        r, rep, chk = measure(cp, n, args.rounds, probe, slices, ends)
        ratios += r
        repeats += rep
        checks += chk
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()
        worst = max(c["residual"] for c in chk if c["residual"] != "")
        differ = [c["config"] for c in chk if c["bitwise_vs_plain"] is False]
        log(f"n={n:>11,} worst residual {worst:.1e}; not the plain pipeline's bits: {differ or 'none'}")
    meta["seconds"] = round(time.perf_counter() - t0, 1)
    (out / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    write_csv(out / "ratios.csv", ratios)
    write_csv(out / "repeats.csv", repeats)
    write_csv(out / "checks.csv", checks)
    log("\n" + table(out))  # the same table the data README pastes (benchmarks.tridiag_ratio_tables)
    bad = [c for c in checks if c["residual"] != "" and not c["residual"] < 1e-12]
    if bad:
        log(f"CHECK FAILED: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    run_main(main)
