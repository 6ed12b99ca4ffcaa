"""The runtime autotuner over the fused CFD space on a GPU: tuned while the inlet runs.

    python -m benchmarks.autotune_fused --table data/cfd/h100/sweep_fused/tuning_table.json --out DIR
        [--size 3328x1024] [--steps 300] [--rounds 21] [--scan-count 32]

1. Every fused variant compiled first (its milliseconds recorded apart), so no timed step compiles.
2. Three runs of the inlet from the same start, as ``python -m kernels.cfd run --space fused --autotune ...``
   makes them: ``off`` (the seven-kernel default), ``seeded`` (the best 8 whole configurations of the fused
   sweep's tuning table for this GPU class, plus the default) and ``scan`` (the default and ``--scan-count``
   configurations drawn from the fused space). One CUDA event per step gives every step's time; the final
   states must be bitwise equal (the tuner keeps the seven kernels' arithmetic, ``tile.arith`` 0, by default).
3. Each run's chosen configuration against the default, and the seeded pick against the sweep's best row, in
   interleaved rounds of 5 steps (ratio, 95% interval, verdict: ``launchtune.kernels.compare``).

Writes results.json and the runs' tuning tables under --out and prints a short table last.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import run_main
from launchtune.kernels.autotune.whole import attach_whole_tuner
from launchtune.kernels.cfd.solver import Solver
from launchtune.kernels.compare import Comparison, compare, interleaved
from launchtune.kernels.device import describe_device
from launchtune.kernels.tuning_table import table_seeds

STEPS_PER_ROUND = 5


def timed_run(size: str, steps: int, mode: str, table: Path, scan_count: int, out: Path) -> tuple[dict, Any]:
    solver = Solver("inlet", size, "cupy")
    whole = attach_whole_tuner(solver, mode, table, scan_count=scan_count) if mode != "off" else None
    step = whole.step if whole is not None else solver.step
    watch = solver.backend.stopwatch()
    solver.backend.synchronize()
    wall0 = time.perf_counter()
    marks = [watch.mark()]
    for _ in range(steps):
        step()
        marks.append(watch.mark())
    solver.backend.synchronize()
    wall = time.perf_counter() - wall0
    per_step = np.array([watch.elapsed_ms(a, b) for a, b in zip(marks[:-1], marks[1:], strict=True)])
    summary = whole.summary() if whole is not None else None
    if whole is not None:
        whole.write_table(out / f"tuning_table_{mode}.json")
    return {
        "mode": mode,
        "steps": steps,
        "wall_s": round(wall, 3),
        "gpu_ms_total": float(per_step.sum()),
        "ms_per_step_median": float(np.median(per_step)),
        "ms_per_step_last_half_median": float(np.median(per_step[steps // 2 :])),
        "per_step_ms": [round(float(x), 5) for x in per_step],
        "summary": summary,
    }, solver.backend.asnumpy(solver.V)


def step_timer(size: str, config: dict[str, int]):
    """A function timing ``STEPS_PER_ROUND`` steps of the inlet at ``config`` (ms per step, CUDA events)."""
    solver = Solver("inlet", size, "cupy")
    solver.set_config(config)
    watch = solver.backend.stopwatch()
    for _ in range(3):  # warm-up: first launches, the stage buffers
        solver.step()

    def once() -> float:
        start = watch.mark()
        for _ in range(STEPS_PER_ROUND):
            solver.step()
        return watch.elapsed_ms(start, watch.mark()) / STEPS_PER_ROUND

    return once


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table", type=Path, required=True, help="the fused sweep's tuning_table.json")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--size", default="3328x1024")
    p.add_argument("--steps", type=int, default=300, help="steps of each run (default 300)")
    p.add_argument("--rounds", type=int, default=21, help="interleaved rounds of each comparison (21)")
    p.add_argument("--scan-count", type=int, default=32, help="configurations drawn for the scan run (32)")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    probe = Solver("inlet", args.size, "cupy")
    t0 = time.perf_counter()
    compile_ms = probe.compile_all_variants()
    device = describe_device(probe.backend)
    result: dict[str, Any] = {
        "command": " ".join(["python -m benchmarks.autotune_fused", *sys.argv[1:]]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": device,
        "size": args.size,
        "compile_ms": round(compile_ms, 1),
        "compile_wall_s": round(time.perf_counter() - t0, 2),
        "runs": {},
    }
    states = {}
    for mode in ("off", "seeded", "scan"):
        result["runs"][mode], states[mode] = timed_run(
            args.size, args.steps, mode, args.table, args.scan_count, args.out
        )
        print(f"{mode}: {result['runs'][mode]['ms_per_step_last_half_median']:.3f} ms/step", flush=True)
    result["bitwise_equal"] = {m: bool(np.array_equal(states["off"], states[m])) for m in ("seeded", "scan")}

    default = dict(probe.space("fused").default)
    sweep_best = table_seeds(args.table, device["gpu_class"], args.size, default).configs[0]
    picks = {m: result["runs"][m]["summary"]["config"] for m in ("seeded", "scan")}
    pairs = {
        "seeded / default": (default, picks["seeded"]),
        "scan / default": (default, picks["scan"]),
        "seeded / sweep best": (sweep_best, picks["seeded"]),
    }
    comparisons = {}
    for name, (a, b) in pairs.items():
        ta, tb = interleaved(step_timer(args.size, a), step_timer(args.size, b), args.rounds)
        comparisons[name] = {**compare(ta, tb).as_dict(), "a_ms": ta, "b_ms": tb}
    result["comparisons"] = comparisons
    result["configs"] = {"default": default, "sweep_best": sweep_best, **picks}
    (args.out / "results.json").write_text(json.dumps(result, indent=1) + "\n")

    print(
        f"\n{device.get('device_name')}, {args.size}, {args.steps} steps per run; compile {compile_ms:.0f} ms"
    )
    print(f"{'run':<8}{'ms/step (2nd half)':>20}{'tuned at step':>15}{'candidates':>12}{'bitwise':>9}")
    for mode, r in result["runs"].items():
        s = r["summary"] or {}
        same = "-" if mode == "off" else str(result["bitwise_equal"][mode])
        print(
            f"{mode:<8}{r['ms_per_step_last_half_median']:>20.3f}{str(s.get('tuned_at_step', '-')):>15}"
            f"{str(s.get('candidates', '-')):>12}{same:>9}"
        )
    for name, c in comparisons.items():
        fields = {k: c[k] for k in ("ratio", "low", "high", "verdict", "rounds", "confidence")}
        print(f"{name}: {Comparison(**fields).text()}")
    return 0


if __name__ == "__main__":
    run_main(main)
