"""Overhead of a SLURM sweep, measured on a real single-node SLURM (root; installs slurm-wlm if missing).

    python -m tests.slurm.measure_overhead --samples 150 --out /tmp/overhead.json

Runs ``launchtune sweep`` (CFD inlet 52x16, numpy backend, two classes on two partitions, one worker
each) and reports: time from the sweep's start to its first result (first task of any kind, and first shard
on disk), how long a job took from submission to a connected worker, and the share of worker time spent
computing, counted against the time workers were connected and against the jobs' whole SLURM run time
(which includes starting Python and the worker).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

from tests.slurm.conftest import PARTITIONS, REPO, write_cluster_config
from tests.slurm.localslurm import LocalSlurm, ensure_installed, why_impossible


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=150, help="samples per class (default 150)")
    parser.add_argument("--batch-size", type=int, default=25)
    parser.add_argument("--size", default="52x16", help="CFD grid (default 52x16)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    reason = why_impossible()
    if reason:
        print(f"cannot measure: {reason}", file=sys.stderr)
        return 2
    ensure_installed()
    root = Path(tempfile.mkdtemp(prefix="lt-overhead-"))
    slurm = LocalSlurm(root / "slurm", list(PARTITIONS))
    slurm.start()
    try:
        config = write_cluster_config(root / "cluster.yaml", release_idle_after_s=60)  # as shipped
        spec = root / "spec.yaml"
        spec.write_text(
            yaml.safe_dump(
                {
                    "name": "overhead",
                    "workload": "cfd",
                    "case": "inlet",
                    "size": args.size,
                    "backend": "numpy",
                    "options": {"space": "paper"},
                    "gpu_classes": list(PARTITIONS.values()),
                    "samples": args.samples,
                    "samplers": ["random"],
                    "repeats": 2,
                    "batch_size": args.batch_size,
                    "seed": 5,
                    "validate": {"pool": 500, "top_k": 1, "repeats": 1},
                    "train": {"hidden_layers": [16], "max_epochs": 50},
                }
            )
        )
        out = root / "out"
        env = {**slurm.env, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        cmd = [
            sys.executable,
            "-m",
            "launchtune",
            "sweep",
            str(spec),
            "--cluster",
            str(config),
            "--out",
            str(out),
        ]
        started = time.time()
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        wall = time.time() - started
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
            return 1
        usage = json.loads((out / ".dask" / "cluster-usage.json").read_text())
        shards = sorted(out.glob("shards/gpu_class=*/shard-*.parquet"), key=lambda p: p.stat().st_mtime)
        timing = json.loads((out / "timing.json").read_text())
        jobs = [j for j in usage["jobs"].values() if j["connected"]]
        comp = {j["JobId"]: j for j in slurm.completed_jobs()}
        job_run_s = sum(
            _ts(comp[j["job_id"]]["EndTime"]) - _ts(comp[j["job_id"]]["StartTime"])
            for j in jobs
            if j["job_id"] in comp
        )
        figures = {
            "samples": 2 * args.samples,
            "sweep_wall_s": round(wall, 1),
            "measure_phase_s": timing["seconds"],
            "first_task_result_after_start_s": round(
                usage["cluster_started"] + usage["first_result_after_s"] - started, 2
            ),
            "first_shard_after_start_s": round(shards[0].stat().st_mtime - started, 2),
            "job_submit_to_worker_s": [round(j["connected"] - j["submitted"], 2) for j in jobs],
            "jobs": len(usage["jobs"]),
            "worker_connected_s": round(usage["worker_connected_s"], 1),
            "worker_busy_s": round(usage["worker_busy_s"], 1),
            "busy_share_of_connected": round(usage["busy_share"], 3),
            "slurm_job_run_s": round(job_run_s, 1),
            "busy_share_of_job_run": round(usage["worker_busy_s"] / job_run_s, 3) if job_run_s else None,
            "cpus": os.cpu_count(),
            "command": " ".join(cmd),
        }
        print(json.dumps(figures, indent=1))
        if args.out:
            args.out.write_text(json.dumps(figures, indent=1))
        return 0
    finally:
        slurm.stop()


if __name__ == "__main__":
    raise SystemExit(main())
