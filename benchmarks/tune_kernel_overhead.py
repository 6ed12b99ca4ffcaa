"""Where each ``launchtune.tune_kernel`` call's time goes, for Kernel Tuner's ``reduction`` example: its
twelve calls (``tests/kernel_tuner_examples/reduction.py``: the first kernel over 800 million floats with
``verify=``, then the second kernel once per ``num_blocks``), each ``max_fevals`` random configurations as
``benchmarks/kernel_tuner_examples.py`` gives them, one after the other in one process.

``python -m benchmarks.tune_kernel_overhead OUT [--size N] [--calls N] [--max-fevals N] [--cprofile]``
prints one line per call: its wall time, then the seconds inside each stage (:data:`STAGES`, each the
project's public function that does it, timed where it is called; compiling is summed over the compile
pool's threads, so it may exceed the wall time it overlaps), and writes ``OUT/stages.json`` (and with
``--cprofile`` a profile per call, ``OUT/call<n>.prof``). ``outside the sweep`` is the call's own work
around it (arguments checked, arrays to the device or files, the inputs' hash and files, then Kernel
Tuner's pair and cache handed back); ``sweep's rest`` what the sweep does besides its timed parts.

``--dry-run`` (no GPU): the calls replay the caches a GPU run recorded
(``data/kernel_tuner_examples/caches/reduction/``, ``simulation_mode``) over 10**6 floats, as many calls as
there are caches, and the per-call lines show what a replay costs."""

from __future__ import annotations

import argparse
import cProfile
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import run_main

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "tests" / "kernel_tuner_examples" / "reduction.cu"
CACHES = REPO / "data" / "kernel_tuner_examples" / "caches" / "reduction"
SIZE = 800_000_000  # the example's
DRY_SIZE = 10**6
# label: (module, attribute) of the public function timed where the sweep looks it up
STAGES: dict[str, tuple[str, str]] = {
    "arguments checked": ("launchtune.checks", "check_arguments"),
    "sweep": ("launchtune.api", "sweep"),
    "plan the sweep (specs read, checked)": ("launchtune.pipeline.sweep.plan", "plan_sweep"),
    "plan the configurations": ("launchtune.pipeline.sweep.run", "plan_task"),
    "build the workload (arrays on the device)": ("launchtune.pipeline.sweep.worker", "build_workload"),
    "device facts": ("launchtune.pipeline.sweep.worker", "device_facts"),
    "measure (all batches)": ("launchtune.pipeline.sweep.run", "measure_in_process"),
    "compile (summed over threads)": ("launchtune.kernels.kernel.workload", "build_function"),
    "check launches": ("launchtune.kernels.kernel.workload", "KernelWorkload.check"),
    "timed launches": ("launchtune.kernels.kernel.workload", "KernelWorkload.run"),
    "merge shards": ("launchtune.pipeline.sweep.run", "merge"),
    "report": ("launchtune.pipeline.sweep.run", "build_report"),
}
# the stages that do not overlap inside the sweep: what is left of it is the sweep's rest
SWEEP_PARTS = ("plan the sweep (specs read, checked)", "plan the configurations", "measure (all batches)",
               "merge shards", "report")  # fmt: skip


class Timers:
    """Seconds spent inside each of :data:`STAGES` (any thread), reset per call."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.lock = threading.Lock()

    def install(self) -> list[str]:
        """Wrap every stage that exists in this version of launchtune; the labels of those that do not."""
        import importlib

        missing = []
        for label, (module_name, attribute) in STAGES.items():
            owner: Any = importlib.import_module(module_name)
            *path, name = attribute.split(".")
            for part in path:
                owner = getattr(owner, part)
            original = getattr(owner, name, None)
            if original is None:
                missing.append(label)
                continue
            setattr(owner, name, self.timed(label, original))
        return missing

    def timed(self, label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kw: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kw)
            finally:
                with self.lock:
                    self.totals[label] = self.totals.get(label, 0.0) + time.perf_counter() - start

        return wrapper

    def take(self) -> dict[str, float]:
        with self.lock:
            out, self.totals = self.totals, {}
        return out


def calls(size: int, count: int) -> list[dict[str, Any]]:
    """The example's ``tune_kernel`` calls, in its order: the keyword arguments of each."""
    params: dict[str, list[int]] = {
        "block_size_x": [2**i for i in range(5, 11)],
        "vector": [2**i for i in range(3)],
        "num_blocks": [2**i for i in range(5, 16)],
        "loop_unroll_factor_0": [0, 1, 8, 16, 32, 64],
        "use_shuffle": [0, 1],
    }
    x = np.random.default_rng(0).random(size, dtype=np.float32)
    sum_x = np.zeros(max(params["num_blocks"]), np.float32)

    def verify(cpu_result: Any, gpu_result: Any, atol: float | None = None) -> bool:
        return bool(np.isclose(cpu_result[0], np.sum(gpu_result[0]), atol=atol))

    first = {"arguments": [sum_x, x, np.int32(size)], "tune_params": dict(params),
             "answer": [np.sum(x), None, None], "verify": verify}  # fmt: skip
    out = [first]
    for nblocks in params["num_blocks"]:
        out.append({"arguments": [sum_x, x, np.int32(nblocks)], "tune_params": {**params, "num_blocks": [1]}})
    return out[:count]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", type=int, default=None, help=f"floats summed (default {SIZE:,})")
    parser.add_argument("--calls", type=int, default=12, help="the first N of the example's twelve calls")
    parser.add_argument("--max-fevals", type=int, default=20, help="random configurations per call")
    parser.add_argument("--cprofile", action="store_true", help="write OUT/call<n>.prof per call")
    parser.add_argument("--dry-run", action="store_true", help="replay the recorded caches, no GPU")
    args = parser.parse_args()
    import launchtune

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    count = min(args.calls, len(list(CACHES.glob("*.json")))) if args.dry_run else args.calls
    timers = Timers()
    missing = timers.install()
    if missing:
        print(f"not in this version (not timed): {', '.join(missing)}")
    code = SOURCE.read_text()
    records = []
    for n, call in enumerate(calls(args.size or (DRY_SIZE if args.dry_run else SIZE), count)):
        extra: dict[str, Any] = {"strategy_options": {"max_fevals": args.max_fevals}, "quiet": True}
        if args.dry_run:
            extra.update(cache=CACHES / f"{n}.json", simulation_mode=True)
        else:
            extra.update(out=out / f"call{n}", force=True)
        profile = cProfile.Profile() if args.cprofile else None
        timers.take()
        start = time.perf_counter()
        if profile is not None:
            profile.enable()
        arguments, params = call.pop("arguments"), call.pop("tune_params")
        results, _ = launchtune.tune_kernel(
            "sum_floats", code, "num_blocks", arguments, params, grid_div_x=[], **call, **extra
        )
        if profile is not None:
            profile.disable()
            profile.dump_stats(out / f"call{n}.prof")
        wall = time.perf_counter() - start
        stages = timers.take()
        sweep = stages.get("sweep", 0.0)
        stages["sweep's rest"] = max(0.0, sweep - sum(stages.get(k, 0.0) for k in SWEEP_PARTS))
        stages["outside the sweep"] = wall - sweep
        records.append({"call": n, "wall_s": wall, "rows": len(results), "stages_s": stages})
        shown = ", ".join(f"{k} {v:.2f}" for k, v in stages.items() if v >= 0.005)
        print(f"call {n}: {wall:.2f} s, {len(results)} rows: {shown}", flush=True)
    (out / "stages.json").write_text(json.dumps(records, indent=1))
    if args.dry_run:
        print(f"dry run: benchmarks.tune_kernel_overhead: {len(records)} calls replayed, stages timed")
    return 0


if __name__ == "__main__":
    run_main(main)
