"""What a live search costs beyond its measurements, on the replay workload (no GPU): the search's wall time
against the time its measurements sleep.

    python -m benchmarks.search_overhead --budget 200 --time-scale 5 --seeds 0 --out data/search_overhead/cpu

The replay workload (``pipeline/sweep/rehearsal.py``) answers each configuration from a recorded sweep
(``--dataset``, the H100 fused CFD sweep by default) and sleeps for the answered time x ``--time-scale``: a
worker that stands in for a GPU. Per seed, two runs of the default strategy (``--strategy``, evolve):

* ``in process``: the strategy's ``Session`` measuring through the workload itself, in this process (no
  cluster): what the strategy costs on the host (fitting, predicting, breeding) beside the sleeps, and its
  CPU seconds (all threads of this process: the figure a loaded machine changes least);
* ``live``: ``launchtune sweep SPEC --strategy evolve --budget N`` as a user runs it (a local Dask cluster,
  one task and one shard per proposal, the journal), its search's seconds from ``timing.json`` and the whole
  command's wall time.

The sleeps are the answered times x the scale (the rows' ``total_ms``; no stragglers are injected).
Writes ``--out``/results.json and table.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from benchmarks import run_main

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "data" / "cfd" / "h100" / "sweep_fused" / "merged"
NOISE = 1_000_003  # the replay noise seed of `launchtune strategies` (seed + this)


def in_process(dataset: Path, strategy: str, budget: int, seed: int, scale: float) -> dict[str, Any]:
    from launchtune.pipeline.learn.models import one_thread
    from launchtune.pipeline.strategies import get_strategy
    from launchtune.pipeline.strategies.base import Session
    from launchtune.pipeline.sweep.rehearsal import RehearsalWorkload

    workload = RehearsalWorkload("x", "8x4", "numpy", str(dataset), time_scale=scale, seed=seed + NOISE)
    start, cpu = time.perf_counter(), time.process_time()
    session = Session(workload, budget, seed, kernels=workload.replay.dataset.kernels)
    with one_thread():
        get_strategy(strategy)(session)
        session.settle()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"wall_s": wall, "cpu_s": cpu, "slept_s": workload.slept_s, "measured": len(session.history)}


def _children_cpu() -> float:
    """CPU seconds of the finished child processes (the command's, all its threads)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def live(dataset: Path, strategy: str, budget: int, seed: int, scale: float, folder: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    spec = {
        "name": f"overhead-{seed}",
        "workload": "replay",
        "case": "x",
        "size": "8x4",
        "backend": "numpy",
        "gpu_classes": ["cpu"],
        "repeats": 7,
        "seed": seed,
        "options": {"dataset": str(dataset), "seed": seed + NOISE, "time_scale": scale},
    }
    path = folder / f"spec-{seed}.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = folder / f"out-{seed}"
    cmd = [sys.executable, "-m", "launchtune", "sweep", str(path), "--strategy", strategy]
    cmd += ["--budget", str(budget), "--out", str(out)]
    # this tree's code, not whichever checkout the environment installed (the command runs in ``folder``)
    path_list = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path_list)}
    start, used = time.perf_counter(), _children_cpu()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=folder, env=env)
    wall, cpu = time.perf_counter() - start, _children_cpu() - used
    if done.returncode != 0:
        raise SystemExit(f"live search failed ({done.returncode}): {done.stderr[-2000:]}")
    timing = json.loads((out / "timing.json").read_text())
    rows = pq.read_table(out / "merged", partitioning="hive").to_pandas()
    slept = float(rows["total_ms"].fillna(0).sum()) * scale / 1000
    return {
        "search_s": float(timing["search"]["cpu"]["seconds"]),
        "command_s": wall,
        "command_cpu_s": cpu,
        "slept_s": slept,
        "measured": int(timing["search"]["cpu"]["measured"]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", type=Path, default=DATASET)
    ap.add_argument("--strategy", default="evolve")
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--time-scale", type=float, default=5.0)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--skip-live", action="store_true", help="only the in-process runs")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in [int(s) for s in args.seeds.split(",")]:
            row: dict[str, Any] = {"seed": seed}
            row["in_process"] = in_process(args.dataset, args.strategy, args.budget, seed, args.time_scale)
            if not args.skip_live:
                row["live"] = live(args.dataset, args.strategy, args.budget, seed, args.time_scale, Path(tmp))
            results.append(row)
            print(json.dumps(row), flush=True)
    lines = [
        "| seed | run | measured | slept (s) | search (s) | search / slept "
        "| beyond sleep per measurement (ms) | host CPU per measurement (ms) "
        "| command (s) | command / search |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        p = r["in_process"]
        extra = 1000 * (p["wall_s"] - p["slept_s"]) / max(1, p["measured"])
        lines.append(
            f"| {r['seed']} | in process | {p['measured']} | {p['slept_s']:.2f} | {p['wall_s']:.2f} "
            f"| {p['wall_s'] / p['slept_s']:.2f} | {extra:.1f} "
            f"| {1000 * p['cpu_s'] / max(1, p['measured']):.1f} | | |"
        )
        if "live" in r:
            v = r["live"]
            extra = 1000 * (v["search_s"] - v["slept_s"]) / max(1, v["measured"])
            lines.append(
                f"| {r['seed']} | live | {v['measured']} | {v['slept_s']:.2f} | {v['search_s']:.2f} "
                f"| {v['search_s'] / v['slept_s']:.2f} | {extra:.1f} | | {v['command_s']:.1f} "
                f"| {v['command_s'] / v['search_s']:.2f} |"
            )
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        meta = {
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": "python -m benchmarks.search_overhead "
            + " ".join(argv if argv is not None else sys.argv[1:]),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load": [round(x, 2) for x in os.getloadavg()],
            "dataset": str(args.dataset.relative_to(REPO))
            if args.dataset.is_relative_to(REPO)
            else str(args.dataset),
            "budget": args.budget,
            "time_scale": args.time_scale,
            "strategy": args.strategy,
        }
        (args.out / "results.json").write_text(json.dumps({"meta": meta, "runs": results}, indent=1) + "\n")
        (args.out / "table.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    run_main(main)
