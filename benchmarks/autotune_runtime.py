"""The runtime autotuner on a GPU: the CFD inlet run, tuning off, scan and seeded, against exhaustive data.

    python -m benchmarks.autotune_runtime --size 3328x1024 --out DIR [--run-seconds 40] [--backend cupy]

1. Exhaustive per-kernel data: every (blocks, threads) of the solver's space (plus the default) set on all
   seven kernels at once and timed by the workload (CUDA events per kernel, median of repeats). Each kernel is
   timed alone by its own events, so one pass gives all seven kernels' whole space.
2. Four runs of the same inlet case and length from the same start, made as ``python -m kernels.cfd run
   --autotune`` makes them (``attach_tuners`` on a ``Solver``): ``off`` (default launch), ``scan`` (the whole
   space), ``seeded`` (a sweep-like table: the best 8 of 30 random exhaustive samples per kernel, what a small
   sweep's report would hand over) and ``restored`` (the table the scan run exported: locked, no scan). One
   CUDA event per step gives every step's time; the final states must be bitwise equal (launch shape never
   changes the answer).
3. Per kernel: the tuned parameters' time alone against the exhaustive best and the default; whole-step times
   of the default, exhaustive-best and tuned configurations re-measured with more repeats, and each against
   the default in interleaved rounds (ratio, 95% interval, verdict: ``launchtune.kernels.compare``).

Writes results.json, exhaustive.csv, launches_scan.csv.gz, launches_seeded.csv.gz, tuning_table.json and
seed_table.json under --out, and prints a short table last.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import gzip
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import run_main
from launchtune.kernels.autotune import Tuning, TuningTable, attach_tuners, save_tuning, tuning_summary
from launchtune.kernels.cfd.solver import Solver
from launchtune.kernels.cfd.workload import CfdWorkload
from launchtune.kernels.compare import Comparison, compare, interleaved
from launchtune.kernels.device import describe_device
from launchtune.kernels.tuning_table import Entry, in_folder


def exhaustive(wl: CfdWorkload, repeats: int) -> tuple[list[dict], list[tuple[int, int]]]:
    """Rows (kernel, blocks, threads, ms) for every pair of the space on every kernel (default first)."""
    space = wl.space()
    names = wl.solver.kernel_names
    sub = space.subspace([f"{names[0]}.blocks", f"{names[0]}.threads"])
    # exactly what --autotune scan tunes (the default first, then the whole space): its candidates
    pairs = Tuning(names[0], sub, gpu_class="", size=wl.solver.size, scan=None).candidates
    limits = wl.solver.max_threads_per_block
    rows = []
    for i, (b, t) in enumerate(pairs):
        config = dict(space.default)
        on = [k for k in names if t <= limits[k]]
        for k in on:
            if i > 0:  # pair 0 is the default configuration itself
                config[f"{k}.blocks"], config[f"{k}.threads"] = b, t
        timing = wl.run(config, repeats)
        for k in on:
            kb, kt = config[f"{k}.blocks"], config[f"{k}.threads"]
            rows.append(
                {"kernel": k, "blocks": kb, "threads": kt, "ms": timing.kernels[k], "default": i == 0}
            )
        if i % 20 == 0:
            print(f"  exhaustive {i + 1}/{len(pairs)}: step {timing.total:.3f} ms", flush=True)
    return rows, pairs


def timed_run(
    backend: str,
    size: str,
    steps: int,
    mode: str,
    table: Path | None,
    out: Path | None,
    period_s: float | None,
):
    solver = Solver("inlet", size, backend)
    tuners = attach_tuners(solver, mode, table, period_s=period_s)
    watch = solver.backend.stopwatch()
    solver.backend.synchronize()
    wall0 = time.perf_counter()
    marks = [watch.mark()]
    for _ in range(steps):
        solver.step()
        marks.append(watch.mark())
    solver.backend.synchronize()
    wall = time.perf_counter() - wall0
    per_step = np.array([watch.elapsed_ms(a, b) for a, b in zip(marks[:-1], marks[1:], strict=True)])
    summary = tuning_summary(tuners) if tuners else None
    written = {k: str(v) for k, v in save_tuning(tuners, out).items()} if tuners and out else {}
    state = solver.backend.asnumpy(solver.V)
    return {
        "mode": mode,
        "steps": steps,
        "wall_s": wall,
        "gpu_ms_total": float(per_step.sum()),
        "ms_per_step_mean": float(per_step.mean()),
        "ms_per_step_median": float(np.median(per_step)),
        "ms_per_step_last_half_median": float(np.median(per_step[steps // 2 :])),
        "per_step_ms": [round(float(x), 5) for x in per_step],
        "summary": summary,
        "files": written,
    }, state


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="3328x1024")
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--backend", default="cupy", help="cupy (the measurement) or numpy (a smoke test on a CPU)"
    )
    ap.add_argument("--repeats", type=int, default=5, help="repeats per exhaustive configuration")
    ap.add_argument("--run-seconds", type=float, default=40.0, help="length of each run at the default speed")
    ap.add_argument(
        "--rounds", type=int, default=21, help="interleaved rounds of each tuned step against the default"
    )
    ap.add_argument("--max-steps", type=int, default=20000)
    ap.add_argument("--work", default="/tmp/autotune_runtime", help="folder for the runs' own outputs")
    ap.add_argument(
        "--seed-table", default=None, help="seed the seeded run from this table, not an emulated sweep"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the emulated sweep's random samples")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    partial: dict = {"command": " ".join(sys.argv)}
    try:
        return measure(args, out, partial)
    except BaseException:
        import traceback

        # a failure late in the run still leaves what was measured before it
        partial["error"] = traceback.format_exc()
        (out / "partial.json").write_text(json.dumps(partial, indent=1, default=str) + "\n")
        raise


def measure(args: argparse.Namespace, out: Path, partial: dict) -> int:
    t0 = time.time()

    wl = CfdWorkload("inlet", args.size, args.backend)
    device = describe_device(wl.backend)
    partial["device"] = device
    print(
        f"device: {device['device_name']} ({device['gpu_class']}), CUDA runtime {device['cuda_runtime']}, "
        f"driver {device['cuda_driver']}, CuPy {device['cupy_version']}",
        flush=True,
    )
    rows, pairs = exhaustive(wl, args.repeats)
    with open(out / "exhaustive.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    names = list(wl.solver.kernel_names)
    by_kernel = {k: {(r["blocks"], r["threads"]): r["ms"] for r in rows if r["kernel"] == k} for k in names}
    default_pair = {
        k: next((r["blocks"], r["threads"]) for r in rows if r["kernel"] == k and r["default"]) for k in names
    }
    best_pair = {k: min(v, key=v.get) for k, v in by_kernel.items()}
    partial["exhaustive_best"] = {k: [*best_pair[k], by_kernel[k][best_pair[k]]] for k in names}
    default_step = wl.run(wl.space().default, 11).total
    del wl

    # The emulated sweep: 30 random exhaustive samples per kernel, best 8 handed over as a "sweep" table.
    rng = np.random.default_rng(args.seed)
    seed_table = TuningTable()
    for k in names:
        grid = [p for p in by_kernel[k] if p != default_pair[k]]
        pick = [grid[i] for i in rng.choice(len(grid), size=min(30, len(grid)), replace=False)]
        ranked = sorted(pick, key=by_kernel[k].get)[:8]
        cands = [{"blocks": b, "threads": t, "time_ms": round(by_kernel[k][(b, t)], 6)} for b, t in ranked]
        seed_table.add(
            Entry(
                device["gpu_class"],
                args.size,
                k,
                cands,
                "sweep",
                {"note": f"emulated sweep: best 8 of 30 random samples, seed {args.seed}"},
            )
        )
    # a real sweep report's table instead (e.g. data/cfd/h100/sweep_paper/tuning_table.json)
    if args.seed_table:
        seed_table = TuningTable.load(args.seed_table)
    seed_path = seed_table.save(out / "seed_table.json")

    # long enough for a full scan (3 whole-step samples per candidate) to finish well inside the run
    steps = int(min(args.max_steps, max(2 * (3 * len(pairs) + 1), args.run_seconds * 1e3 / default_step)))
    print(f"default step {default_step:.3f} ms -> {steps} steps per run", flush=True)
    runs, states = {}, {}
    work = Path(args.work)  # the runs' own folders stay out of --out (the device returns few files)
    scan_dir, seed_dir = work / "scan", work / "seeded"
    for mode, table, folder in [
        ("off", None, None),
        ("scan", None, scan_dir),
        ("seeded", seed_path, seed_dir),
        ("restored", None, None),
    ]:
        if mode == "restored":
            table = in_folder(scan_dir)
        runs[mode], states[mode] = timed_run(
            args.backend,
            args.size,
            steps,
            "seeded" if mode == "restored" else mode,
            table,
            folder,
            period_s=None,
        )
        r = runs[mode]
        partial.setdefault("runs", {})[mode] = {k: v for k, v in r.items() if k != "per_step_ms"}
        print(f"  run {mode}: {r['ms_per_step_mean']:.3f} ms/step mean, wall {r['wall_s']:.1f} s", flush=True)
    bitwise = {m: bool(np.array_equal(states["off"], s)) for m, s in states.items()}

    # Whole-step times of the configurations that matter, re-measured with more repeats.
    wl = CfdWorkload("inlet", args.size, args.backend)
    space = wl.space()
    configs = {"default": dict(space.default)}
    configs["exhaustive_best"] = {
        f"{k}.{p}": v for k in names for p, v in zip(("blocks", "threads"), best_pair[k], strict=True)
    }
    for mode in ("scan", "seeded"):
        kern = runs[mode]["summary"]["kernels"]
        configs[f"{mode}_tuned"] = {f"{k}.{p}": kern[k][p] for k in names for p in ("blocks", "threads")}
    step_times = {}
    for name, config in configs.items():
        t = wl.run(config, 21)
        step_times[name] = {"total_ms": t.total, "kernels_ms": t.kernels}
    # Each tuned whole step against the default in interleaved rounds: the speed-up with its 95% interval and
    # the verdict it decides (launchtune.kernels.compare), never two medians taken apart
    step_vs_default = {}
    for name, config in configs.items():
        if name == "default":
            continue
        a, b = interleaved(
            lambda: wl.run(configs["default"], 5).total, lambda c=config: wl.run(c, 5).total, args.rounds
        )
        step_vs_default[name] = compare(a, b).as_dict()

    per_kernel = {}
    for k in names:
        best = by_kernel[k][best_pair[k]]
        entry = {
            "exhaustive_best": list(best_pair[k]),
            "best_ms": best,
            "default": list(default_pair[k]),
            "default_ms": by_kernel[k][default_pair[k]],
            "default_over_best": by_kernel[k][default_pair[k]] / best,
        }
        for mode in ("scan", "seeded", "restored"):
            s = runs[mode]["summary"]["kernels"][k]
            p = (s["blocks"], s["threads"])
            entry[mode] = {
                "param": list(p),
                "alone_ms": by_kernel[k].get(p),
                "over_best": by_kernel[k].get(p, np.nan) / best,
                "first_scan_steps": s["first_scan_steps"],
                "first_scan_launches": s["first_scan_launches"],
                "nonoptimal_launches": s["nonoptimal_launches"],
                "nonoptimal_share": s["nonoptimal_share"],
            }
        per_kernel[k] = entry

    # copy the launch logs and the exported table up one level (what comes back from $OUT)
    for mode, folder in (("scan", scan_dir), ("seeded", seed_dir)):
        with gzip.open(out / f"launches_{mode}.csv.gz", "wb") as f:
            f.write((folder / "launches.csv").read_bytes())
    shutil.copyfile(in_folder(scan_dir), in_folder(out))

    result = {
        "what": "runtime autotuner on the CFD inlet case (benchmarks/autotune_runtime.py)",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "device": device,
        "size": args.size,
        "steps_per_run": steps,
        "exhaustive_pairs": len(pairs),
        "exhaustive_repeats": args.repeats,
        "per_kernel": per_kernel,
        "step_times": step_times,
        "step_vs_default": step_vs_default,
        "runs": {m: {k: v for k, v in r.items() if k != "per_step_ms"} for m, r in runs.items()},
        "per_step_ms": {m: r["per_step_ms"] for m, r in runs.items()},
        "bitwise_equal_to_off": bitwise,
        "elapsed_s": time.time() - t0,
    }
    (out / "results.json").write_text(json.dumps(result, indent=1, default=str) + "\n")

    print(f"\n{args.size} inlet, {steps} steps per run, {device['device_name']}")
    print(f"final states bitwise equal to the off run: {bitwise}")
    head = ("kernel", "best(b,t)", "best_ms", "dflt/best", "scan(b,t)", "scan/best", "seed(b,t)", "seed/best")
    print(" ".join(f"{h:>12}" for h in head) + "   scan_steps seed_steps")
    for k, e in per_kernel.items():
        cells = (
            k,
            tuple(e["exhaustive_best"]),
            f"{e['best_ms']:.4f}",
            f"{e['default_over_best']:.3f}",
            tuple(e["scan"]["param"]),
            f"{e['scan']['over_best']:.3f}",
            tuple(e["seeded"]["param"]),
            f"{e['seeded']['over_best']:.3f}",
        )
        steps_taken = f"{e['scan']['first_scan_steps']!s:>10} {e['seeded']['first_scan_steps']!s:>10}"
        print(" ".join(f"{str(c):>12}" for c in cells) + "   " + steps_taken)
    print(
        "whole step, ms (median of 21): "
        + ", ".join(f"{n} {v['total_ms']:.4f}" for n, v in step_times.items())
    )
    for name, c in step_vs_default.items():
        print(f"{name} / default, interleaved: {Comparison(**c).text()}")
    for m, r in runs.items():
        s = r["summary"]
        share = ""
        if s:
            pct = 100 * s["nonoptimal_share"]
            share = f"; off-optimum {s['nonoptimal_launches']} launches, {pct:.2f}% of kernel time"
            if s["nonoptimal_launches"]:
                # run length at which that fixed cost would be 0.2% of the run (HOOMD's figure)
                tuned_step = runs["restored"]["ms_per_step_median"]
                n02 = s["nonoptimal_ms"] / (0.002 * tuned_step)
                share += f", {s['excess_ms']:.1f} ms lost; 0.2% after {n02:.0f} steps"
        print(
            f"run {m:8}: {r['ms_per_step_mean']:.4f} ms/step (mean), "
            f"{r['ms_per_step_last_half_median']:.4f} (median, last half), wall {r['wall_s']:.1f} s{share}"
        )
    print(f"elapsed {result['elapsed_s']:.0f} s")
    return 0


if __name__ == "__main__":
    run_main(main)
