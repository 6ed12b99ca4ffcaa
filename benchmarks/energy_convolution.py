"""Time against energy on this GPU: the example convolution's configurations measured for both (NVML's energy
counter, ``kernels.energy``), the pick under ``minimize: time`` and under ``minimize: energy_mJ``, and each
pick measured again on both quantities in interleaved rounds.

    python -m benchmarks.energy_convolution --out DIR [--samples 48] [--rounds 9] [--size 4096x4096]

The sample is the default configuration and a seeded random sample of the convolution space, each checked and
measured once for time (median of ``--repeats`` launches) and energy (the counter over a window of launches);
the two objectives rank the same rows, so each pick is the best of the same sample under its objective. Then
in each of ``--rounds`` rounds the default and both picks are measured again for time and energy, in an order
rotated every round, and the ratios get their 95% intervals (``kernels.compare``). Writes ``DIR/energy.json``;
``benchmarks/energy_figure.py`` draws the time-energy front from it. Where the card has no energy counter,
the file says why and holds the times only."""

from __future__ import annotations

import argparse
import json
import time
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import run_main
from benchmarks.dry_run import done, kernel_space
from launchtune.kernels.compare import compare
from launchtune.kernels.kernel.workload import make_workload


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--size", default="4096x4096")
    p.add_argument("--samples", type=int, default=48)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dry-run", action="store_true", help="no GPU: check what it would build and stop")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    spec = str(files("launchtune.kernels.examples").joinpath("convolution.yaml"))
    if args.dry_run:
        space = kernel_space(spec, args.size)
        n = len([space.default, *space.sample(args.samples - 1, args.seed)])
        return done("benchmarks.energy_convolution", f"{spec} at {args.size}: {n} configurations to measure")
    w = make_workload("convolution", args.size, "cupy", spec=spec, energy="true")
    space = w.space()
    summary: dict[str, Any] = {"size": args.size, "seed": args.seed, "repeats": args.repeats}
    if w.energy_reason:
        summary["energy_reason"] = w.energy_reason
        print(w.energy_reason)
    configs = [space.default, *space.sample(args.samples - 1, args.seed)]
    w.compile_ahead(configs)
    rows = []
    t0 = time.perf_counter()
    for config in configs:
        if not w.check(config).ok:
            continue
        timing = w.run(config, args.repeats)
        rows.append(
            {
                "config": config,
                "time_ms": timing.total,
                "energy_mJ": timing.extra.get("energy_mJ"),
                "power_W": timing.extra.get("power_W"),
                "launches": timing.extra.get("energy_launches"),
            }
        )
    summary["sample_seconds"] = round(time.perf_counter() - t0, 1)
    summary["rows"] = rows
    if w.energy_reason:
        (args.out / "energy.json").write_text(json.dumps(summary, indent=1))
        return 0
    by_time = min(rows, key=lambda r: r["time_ms"])
    by_energy = min(rows, key=lambda r: r["energy_mJ"])
    named = {"default": rows[0]["config"], "time": by_time["config"], "energy": by_energy["config"]}
    summary["picks"] = named
    keys = list(named)
    times = np.zeros((args.rounds, len(keys)))
    energy = np.zeros((args.rounds, len(keys)))
    for r in range(args.rounds):
        for k in range(len(keys)):
            j = (k + r) % len(keys)
            timing = w.run(named[keys[j]], args.repeats)
            times[r, j], energy[r, j] = timing.total, timing.extra["energy_mJ"]
    summary["rounds"] = {"order": keys, "time_ms": times.tolist(), "energy_mJ": energy.tolist()}

    def ratio(values: np.ndarray, a: str, b: str) -> dict[str, Any]:  # b / a, per round
        c = compare(values[:, keys.index(a)].tolist(), values[:, keys.index(b)].tolist(), seed=args.seed)
        return {k: c.as_dict()[k] for k in ("ratio", "low", "high", "verdict")}

    summary["comparisons"] = {
        "time: energy pick / time pick": ratio(times, "time", "energy"),
        "energy: energy pick / time pick": ratio(energy, "time", "energy"),
        "time: time pick / default": ratio(times, "default", "time"),
        "energy: time pick / default": ratio(energy, "default", "time"),
        "time: energy pick / default": ratio(times, "default", "energy"),
        "energy: energy pick / default": ratio(energy, "default", "energy"),
    }
    (args.out / "energy.json").write_text(json.dumps(summary, indent=1))
    for name, c in summary["comparisons"].items():
        print(f"{name}: {c['ratio']:.3f} [{c['low']:.3f}, {c['high']:.3f}] {c['verdict']}")
    return 0


if __name__ == "__main__":
    run_main(main)
