"""Every configuration of the heat example that advances one step per launch, checked and timed on this GPU:
the rows a temporal-tiling pick is compared with (``live_search.py --reference-configs``).

    python -m benchmarks.heat_one_step --out DIR [--size 4096x4096] [--repeats 7]

Writes ``DIR/one_step.json``: every configuration with ``steps_per_launch`` 1 that passed its check, fastest
first, each with its median time per step (ms; one step per launch, so per launch too)."""

from __future__ import annotations

import argparse
import json
from importlib.resources import files
from pathlib import Path

from benchmarks import run_main
from benchmarks.dry_run import done, kernel_space
from launchtune.kernels.kernel.workload import make_workload
from launchtune.kernels.objective import cost_of


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--size", default="4096x4096")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--dry-run", action="store_true", help="no GPU: check what it would build and stop")
    args = p.parse_args(argv)
    spec = str(files("launchtune.kernels.examples").joinpath("heat.yaml"))
    if args.dry_run:
        n = sum(c["steps_per_launch"] == 1 for c in kernel_space(spec, args.size).grid())
        return done("benchmarks.heat_one_step", f"{spec} at {args.size}: {n} one-step configurations")
    w = make_workload("heat", args.size, "cupy", spec=spec)
    configs = [c for c in w.space().grid() if c["steps_per_launch"] == 1]
    w.compile_ahead(configs)
    rows, rejected = [], 0
    for config in configs:
        if not w.check(config).ok:
            rejected += 1
            continue
        rows.append({"config": config, "recorded_ms": cost_of(w.run(config, args.repeats))})
    rows.sort(key=lambda r: r["recorded_ms"])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "one_step.json").write_text(json.dumps(rows, indent=1))
    print(f"{len(rows)} one-step configurations ran ({rejected} rejected); fastest {rows[0]}")
    return 0


if __name__ == "__main__":
    run_main(main)
