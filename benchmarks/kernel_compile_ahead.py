"""Samples per minute of the ``kernel`` workload with and without compiling ahead, on one GPU.

Each mode runs in a fresh process with an empty CuPy kernel cache (``CUPY_CACHE_DIR``), so every
configuration is compiled in the run, and measures the same seeded configurations as a sweep's worker does:
in batches, each batch queued on the compile pool first (``compile_ahead``), then check and timed run per
configuration. ``compile_workers`` 0 compiles each configuration when it is reached.

    python -m benchmarks.kernel_compile_ahead --out compile_ahead.json
    python -m benchmarks.kernel_compile_ahead --samples 40,300 --workers 0,auto --batch 100
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import run_main
from benchmarks.dry_run import done, kernel_space

SPEC = str(Path(__file__).resolve().parents[1] / "kernels" / "examples" / "convolution.yaml")


def measure(spec: str, size: str, workers: str, samples: int, batch: int, repeats: int, seed: int) -> dict:
    """One mode in this process: build, then measure ``samples`` configurations as a sweep's worker does."""
    from launchtune.kernels.kernel.workload import make_workload

    t0 = time.perf_counter()
    w = make_workload("bench", size, "cupy", spec=spec, compile_workers=workers)
    w.reference_outputs()  # the default configuration: compiled and run once, as a worker's warm-up does
    build_s = time.perf_counter() - t0
    configs = w.space().sample(samples, seed)
    counts = {"ok": 0, "invalid": 0}
    compile_ms = 0.0
    start = time.perf_counter()
    for i in range(0, len(configs), batch):
        part = configs[i : i + batch]
        w.compile_ahead(part)
        for config in part:
            if w.check(config).ok:
                compile_ms += w.run(config, repeats).extra["compile_ms"]
                counts["ok"] += 1
            else:
                compile_ms += w.take_compile_ms()
                counts["invalid"] += 1
    seconds = time.perf_counter() - start
    return {
        "compile_workers": w.compiler.workers,
        "samples": len(configs),
        **counts,
        "seconds": round(seconds, 2),
        "samples_per_minute": round(len(configs) / seconds * 60, 1),
        "compile_s_total": round(compile_ms / 1e3, 2),
        "compile_ms_mean": round(compile_ms / max(1, len(configs)), 1),
        "build_s": round(build_s, 2),
        "batch": batch,
        "repeats": repeats,
        "size": size,
        "cpus": len(os.sched_getaffinity(0)),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spec", default=SPEC, help="kernel spec (default: the example convolution)")
    p.add_argument("--size", default="4096x4096")
    p.add_argument("--workers", default="0,auto", help="compile_workers of each mode, comma-separated")
    p.add_argument("--samples", default="60,300", help="configurations of each mode (one number: all modes)")
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="JSON file of the results (default: print only)")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a mode, in its own process
    p.add_argument("--dry-run", action="store_true", help="no GPU: check what it would build and stop")
    args = p.parse_args(argv)
    workers = args.workers.split(",")
    samples = [int(s) for s in args.samples.split(",")]
    samples = samples * len(workers) if len(samples) == 1 else samples
    if len(samples) != len(workers):
        p.error(f"--samples: {len(samples)} numbers for {len(workers)} modes of --workers")
    if args.dry_run:
        space = kernel_space(args.spec, args.size)
        n = [len(space.sample(k, args.seed)) for k in samples]
        return done(
            "benchmarks.kernel_compile_ahead", f"{args.spec} at {args.size}: modes {workers}, {n} samples"
        )
    if args.one:
        print(
            json.dumps(
                measure(args.spec, args.size, workers[0], samples[0], args.batch, args.repeats, args.seed)
            )
        )
        return 0
    results = []
    for mode, n in zip(workers, samples, strict=True):
        with tempfile.TemporaryDirectory(prefix="cupy-cache-") as cache:
            cmd = [sys.executable, "-m", "benchmarks.kernel_compile_ahead", "--one", "--spec", args.spec,
                   "--size", args.size, "--workers", mode, "--samples", str(n), "--batch", str(args.batch),
                   "--repeats", str(args.repeats), "--seed", str(args.seed)]  # fmt: skip
            finished = subprocess.run(
                cmd, env={**os.environ, "CUPY_CACHE_DIR": cache}, capture_output=True, text=True
            )
            if finished.returncode != 0:
                print(finished.stderr[-3000:], file=sys.stderr)
                return finished.returncode
            results.append(json.loads(finished.stdout.strip().splitlines()[-1]))
            print(json.dumps(results[-1]), flush=True)
    if len(results) > 1 and results[0]["samples_per_minute"]:
        first, last = results[0], results[-1]
        speedup = last["samples_per_minute"] / first["samples_per_minute"]
        print(
            f"samples per minute: {last['samples_per_minute']} with {last['compile_workers']} compile "
            f"threads, {first['samples_per_minute']} with {first['compile_workers']}: {speedup:.2f}x"
        )
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    run_main(main)
