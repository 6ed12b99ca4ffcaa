"""What the fused CFD kernels' other arithmetic buys, and what it costs the answer (issue 16).

The seven kernels and the fused variants with ``tile.arith`` 0 are compiled with ``--fmad=false`` and the
seven kernels' operations, so every such configuration gives bitwise the seven-kernel state. The stage kernel
waits on memory and on FP64 latency (docs/cfd.md): ``tile.arith`` 1 lets nvcc contract multiply-adds into FMAs
(one rounding instead of two) and takes fewer divisions and roots in HLLC and the update (``fused.cu``'s
``RECIP``: 9 reciprocal square roots per face instead of 15 divisions and 6 roots). Its state is then no
longer the seven kernels' bits, and the question is whether it stays within the issue's 1e-12.

At ``--size`` (default the inlet's 3328x1024) this times, in R interleaved rounds (a fresh seeded random
order each round; CUDA events around ``--steps`` steps after a warm-up step; ms per step), the seven-kernel
default and each fused configuration of ``CONFIGS`` with ``tile.arith`` 0 and 1. It reports every ratio with
its 95% interval (``kernels.compare``), and each configuration's effective bandwidth on its level's fewest
bytes against the device-to-device copy. Correctness: after 100 steps from the same state, each
configuration's primitive variables (rho, u, v, p) against the seven-kernel default's, max |difference| over
max |value| each.
(Until 2026-11-25 this was ``benchmarks/cfd_fma_probe.py``, comparing FMA contraction alone:
``data/cfd/h100/fma_probe/``.)

    python -m lab.cfd_arith --out $OUT [--size 3328x1024] [--rounds 21] [--steps 10]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from launchtune.kernels.backend import get_backend
from launchtune.kernels.compare import compare
from launchtune.kernels.device import describe_device

# The best configuration of both fused sweeps (H100 and H200, data/cfd/*/sweep_fused) and the best directional
# configuration of the H200 sweep.
CONFIGS = {
    "stage_best": {
        "fusion": 2,
        "tile.block_x": 256,
        "tile.block_y": 2,
        "tile.cells_x": 1,
        "tile.cells_y": 2,
        "tile.smem": 0,
        "tile.faces": 1,
        "tile.maxreg": 64,
    },
    # the stage tile of stage_best with 256 threads a block, so that an 80-register cap keeps 3 blocks a
    # multiprocessor (tile.maxreg 80, added 2026-11-25; data/cfd/h100/stage_tuning/)
    "stage_r80": {
        "fusion": 2,
        "tile.block_x": 256,
        "tile.block_y": 1,
        "tile.cells_x": 1,
        "tile.cells_y": 4,
        "tile.smem": 0,
        "tile.faces": 1,
        "tile.maxreg": 80,
    },
    # the best recorded rows of the H100 and H200 sweeps of the space with tile.arith on c8fffdd's kernels
    # (data/cfd/{h100,h200}/sweep_fused_arith at ace1b6f); with cb10d31's kernels stage_h200_row is both
    # cards' best row
    "stage_h100_row": {
        "fusion": 2,
        "tile.block_x": 32,
        "tile.block_y": 4,
        "tile.cells_x": 2,
        "tile.cells_y": 1,
        "tile.smem": 0,
        "tile.faces": 1,
        "tile.maxreg": 80,
    },
    "stage_h200_row": {
        "fusion": 2,
        "tile.block_x": 32,
        "tile.block_y": 8,
        "tile.cells_x": 2,
        "tile.cells_y": 1,
        "tile.smem": 0,
        "tile.faces": 1,
        "tile.maxreg": 64,
    },
    "directional_best": {
        "fusion": 1,
        "tile.block_x": 32,
        "tile.block_y": 2,
        "tile.cells_x": 1,
        "tile.cells_y": 2,
        "tile.smem": 1,
        "tile.faces": 2,
        "tile.maxreg": 64,
    },
}
CHECK_STEPS = 100


def ms_per_step(solver, config: dict, steps: int) -> float:
    """ms per step of ``config`` from the solver's initial state: a warm-up step, then CUDA events around
    ``steps`` steps."""
    cp = solver.backend.xp
    solver.set_config(config)
    solver.reset()
    solver.step()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(steps):
        solver.step()
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop) / steps


def agreement(got: np.ndarray, want: np.ndarray) -> dict:
    """Bitwise equal, and each variable's largest |got - want| over its largest |want| (rho, u, v, p)."""
    return {
        "bitwise": bool(np.array_equal(got, want)),
        "rel_diff_per_variable": [
            float(np.abs(got[q] - want[q]).max() / np.abs(want[q]).max()) for q in range(len(want))
        ],
    }


def state_after(solver, config: dict, steps: int = CHECK_STEPS) -> np.ndarray:
    """The interior primitive state (rho, u, v, p) after ``steps`` steps of ``config`` from the initial
    state."""
    solver.set_config(config)
    solver.reset()
    for _ in range(steps):
        solver.step()
    return solver.backend.asnumpy(solver.V[:, 2:-2, 2:-2])


def main() -> int:
    from benchmarks.cfd_step import fused_min_bytes, min_bytes
    from launchtune.kernels.cfd.fused_space import FUSION_LEVELS
    from launchtune.kernels.cfd.solver import Solver
    from launchtune.kernels.device import measure_copy_bandwidth

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for results.json")
    ap.add_argument("--size", default="3328x1024", help="cells, NXxNY (default: the inlet's 3328x1024)")
    ap.add_argument("--rounds", type=int, default=21, help="interleaved rounds (default 21)")
    ap.add_argument("--steps", type=int, default=10, help="steps per timed call (default 10)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the rounds' random order (default 0)")
    args = ap.parse_args()
    backend = get_backend("cupy")
    nx, ny = (int(v) for v in args.size.lower().split("x"))
    s = Solver("inlet", (nx, ny), "cupy")
    space = s.space("fused")
    runs: dict[str, dict] = {"default": space.default}
    for name, tile in CONFIGS.items():
        for arith in (0, 1):
            runs[f"{name}_arith{arith}"] = space.validate({**space.default, **tile, "tile.arith": arith})
    copy_gbs = measure_copy_bandwidth(backend)
    seven = sum(min_bytes(nx, ny, s.scheme.stages, s.setup.source_mode).values())
    step_bytes = {
        n: fused_min_bytes(nx, ny, s.scheme.stages, FUSION_LEVELS[c["fusion"]], seven)
        for n, c in runs.items()
    }

    def timed(name: str) -> float:
        return ms_per_step(s, runs[name], args.steps)

    def state(name: str) -> np.ndarray:
        return state_after(s, runs[name])

    names = list(runs)
    want = state("default")
    agree = {}
    for name in names[1:]:
        agree[name] = agreement(state(name), want)
    times: dict[str, list[float]] = {n: [] for n in names}
    rng = np.random.default_rng(args.seed)
    for _ in range(args.rounds):  # a fresh random order each round (a rotated one favours fixed neighbours)
        for i in rng.permutation(len(names)):
            times[names[i]].append(timed(names[i]))
    pairs = [("default", n) for n in names[1:]]
    pairs += [(n, n.replace("_arith0", "_arith1")) for n in names if "_arith0" in n]
    ratios = []
    for a, b in pairs:
        c = compare(times[a], times[b], seed=0)
        ratios.append({"a": a, "b": b, "ratio": c.ratio, "low": c.low, "high": c.high, "verdict": c.verdict})
    median = {n: float(np.median(v)) for n, v in times.items()}
    fraction_of_copy = {n: step_bytes[n] / (median[n] * 1e-3) / 1e9 / copy_gbs for n in names}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {
        "device": describe_device(backend),
        "size": [nx, ny],
        "rounds": args.rounds,
        "steps_per_call": args.steps,
        "seed": args.seed,
        "copy_gbs": copy_gbs,
        "configs": runs,
        "min_bytes_per_step": step_bytes,
        "median_ms_per_step": median,
        "fraction_of_copy": fraction_of_copy,
        "agreement_after_100_steps": agree,
        "ratios": ratios,
        "times": times,
    }
    (out / "results.json").write_text(json.dumps(result, indent=1, default=str))
    print(f"copy {copy_gbs:.0f} GB/s; % of copy: the level's fewest bytes per step over the median step")
    print("| configuration | ms/step | vs default [95%] | % of copy | bitwise | max rel diff, 100 steps |")
    print("| --- | ---: | --- | ---: | --- | --- |")
    for n in names:
        row = next((r for r in ratios if r["a"] == "default" and r["b"] == n), None)
        vs = f"{row['ratio']:.3f} [{row['low']:.3f}, {row['high']:.3f}]" if row else ""
        a = agree.get(n, {"bitwise": True, "rel_diff_per_variable": [0.0] * 4})
        diffs = ", ".join(f"{d:.1e}" for d in a["rel_diff_per_variable"])
        pct = 100 * fraction_of_copy[n]
        print(f"| {n} | {median[n]:.3f} | {vs} | {pct:.0f} | {a['bitwise']} | {diffs} (rho, u, v, p) |")
    for r in ratios[len(names) - 1 :]:
        print(f"{r['b']} / {r['a']}: {r['ratio']:.3f} [{r['low']:.3f}, {r['high']:.3f}] {r['verdict']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
