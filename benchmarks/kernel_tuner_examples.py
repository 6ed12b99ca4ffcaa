"""Kernel Tuner's CUDA examples (``tests/kernel_tuner_examples/``, its ``examples/cuda/``), each run with
Kernel Tuner and with launchtune, the import the only change to the script.

``python -m benchmarks.kernel_tuner_examples OUT [NAME ...] [--tool kt|launchtune|both] [--replay CACHES]``
runs each script in a fresh folder under ``OUT`` (its ``.cu`` files beside it), in a subprocess of its
own, and writes ``OUT/examples.json``: per example and tool, the wall time, each call's pick and its
time, and the rows measured and ok. Every ``tune_kernel`` call is wrapped (:func:`wrapper_source`) to record
what it returned and, for launchtune, to keep a Kernel Tuner cache per call (``OUT/caches/<name>/<n>.json``),
which ``--replay CACHES`` replays with ``simulation_mode`` on a machine without a GPU (what a replay, which
launches nothing, stands in for: :data:`REPLAY_MAX_RANDOM`). Where a space is too
large to tune whole (:data:`MAX_FEVALS`), both tools get the same number of random configurations: Kernel
Tuner ``strategy="random_sample"``, launchtune ``strategy_options={"max_fevals": N}``."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from benchmarks import run_main

EXAMPLES = Path(__file__).resolve().parents[1] / "tests" / "kernel_tuner_examples"
NAMES = ("vector_add", "stencil", "matmul", "zeromeanfilter", "vector_add_codegen", "vector_add_metric",
         "vector_add_cupy", "convolution", "convolution_correct", "sepconv", "reduction")  # fmt: skip
# random configurations per call where the whole space would take long (the same for both tools)
# (20 for convolution, reduction and convolution_correct: all eleven, both tools, fit one 10-minute call)
MAX_FEVALS = {"convolution": 20, "sepconv": 100, "reduction": 20, "matmul": 100, "convolution_correct": 20}
TIMEOUT_S = 300  # per example and tool
# A replay launches nothing, so what a script computes on a GPU outside tune_kernel stands in: run_kernel
# returns its arguments unchanged (convolution_correct's answer: simulation_mode checks nothing), and an
# input of more than REPLAY_MAX_RANDOM random numbers is a constant of its shape, not its bytes (reduction's
# 800 million: 9.6 GB of host memory for values nothing reads)
REPLAY_MAX_RANDOM = 10**7
NO_CACHE_EXIT = 3  # a replay reached a call that has no recorded cache: its script ran as far as they go


def with_launchtune(text: str) -> str:
    """The script with Kernel Tuner's import of ``tune_kernel``/``run_kernel`` made launchtune's (its other
    modules, ``kernel_tuner.util``, ``kernel_tuner.file_utils``, stay Kernel Tuner's)."""
    text = re.sub(r"^from kernel_tuner import ", "from launchtune import ", text, flags=re.M)
    return re.sub(r"^import kernel_tuner$", "import launchtune as kernel_tuner", text, flags=re.M)


def wrapper_source(tool: str, name: str, record: Path, caches: Path | None, replay: bool) -> str:
    """Python run before the script: wraps ``tune_kernel`` to record each call's pick, time and rows."""
    fevals = MAX_FEVALS.get(name)
    return f"""
import json, os, sys, time, runpy, math
tool, record, fevals = {tool!r}, {str(record)!r}, {fevals!r}
caches, replay = {str(caches) if caches else None!r}, {replay!r}
calls = []
if replay:
    import numpy
    import launchtune.api
    class Shape(numpy.ndarray):  # an input that stands in by its shape: astype keeps it a constant view
        def astype(self, dtype, *args, **kw):
            return numpy.broadcast_to(numpy.zeros((), dtype), self.shape).view(Shape)
    random = numpy.random.rand
    def rand(*shape):
        if math.prod(shape) <= {REPLAY_MAX_RANDOM}:
            return random(*shape)
        return numpy.broadcast_to(numpy.float64(0.5), shape).view(Shape)
    numpy.random.rand = rand
    launchtune.api.run_kernel = lambda name, source, size, arguments, params, **kw: [
        numpy.array(a) if isinstance(a, numpy.ndarray) else a for a in arguments]
if tool == "kt":
    import kernel_tuner as module
    target = module
else:
    import launchtune.api as target
original = target.tune_kernel
def tune_kernel(*args, **kw):
    n = len(calls)
    if fevals:
        kw.setdefault("strategy_options", {{"max_fevals": fevals}})
        if tool == "kt":
            kw.setdefault("strategy", "random_sample")
    if caches and tool != "kt":
        kw["cache"] = f"{{caches}}/{{n}}.json"
        kw["simulation_mode"] = replay
        if replay and not os.path.exists(kw["cache"]):
            print(f"replay: no cache recorded for call {{n}}", file=sys.stderr)
            sys.exit({NO_CACHE_EXIT})
    t0 = time.perf_counter()
    results, env = pair = original(*args, **kw)
    ok = [r for r in results if isinstance(r.get("time"), float)]
    best = min(ok, key=lambda r: r["time"]) if ok else None
    params = args[4] if len(args) > 4 else kw.get("tune_params", {{}})
    calls.append({{"kernel": args[0] if args else kw.get("kernel_name"), "seconds": time.perf_counter() - t0,
                  "rows": len(results), "ok": len(ok), "best_time_ms": best and best["time"],
                  "pick": best and {{k: v for k, v in best.items() if k in params}}}})
    with open(record, "w") as f:
        json.dump(calls, f, default=str)
    return pair
target.tune_kernel = tune_kernel
if tool == "kt":
    import kernel_tuner.interface
    kernel_tuner.interface.tune_kernel = tune_kernel
sys.argv = ["{name}.py"]
runpy.run_path("{name}.py", run_name="__main__")
"""


def run_one(
    name: str,
    tool: str,
    out: Path,
    replay: Path | None = None,
    timeout_s: int = TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> dict:
    """One example with one tool in ``out/<tool>/<name>/``: the script (import changed for launchtune),
    its ``.cu`` files; (wall seconds, return code, the last lines of its output, each call's record).
    ``env``: more environment for its process (``benchmarks.time_to_pick``: cold compile caches of its
    own)."""
    folder = out / tool / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for cu in EXAMPLES.glob("*.cu"):
        shutil.copy(cu, folder / cu.name)
    text = (EXAMPLES / f"{name}.py").read_text()
    (folder / f"{name}.py").write_text(text if tool == "kt" else with_launchtune(text))
    record = folder / "calls.json"
    caches = (replay or out / "caches") / name if tool != "kt" else None
    if caches is not None and replay is None:
        caches.mkdir(parents=True, exist_ok=True)
    code = wrapper_source(tool, name, record, caches, replay is not None)
    env = {"LAUNCHTUNE_RESULTS": str(folder / "results"), **(env or {})}
    t0 = time.perf_counter()
    rc: int | str
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True,
                              timeout=timeout_s, env={**os.environ, **env})  # fmt: skip
        rc, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:  # one slow example is a row, not the end of the run
        partial = [
            x.decode(errors="replace") if isinstance(x, bytes) else x or "" for x in (exc.stdout, exc.stderr)
        ]
        rc, output = "timeout", f"{partial[0]}{partial[1]}\ntimed out after {timeout_s} s"
    seconds = time.perf_counter() - t0
    calls = json.loads(record.read_text()) if record.is_file() else []
    tail = (output if isinstance(output, str) else output.decode(errors="replace")).strip().splitlines()[-3:]
    return {"example": name, "tool": tool, "seconds": round(seconds, 2), "rc": rc,
            "last_lines": tail, "calls": calls}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("names", nargs="*", default=list(NAMES))
    parser.add_argument("--tool", choices=("kt", "launchtune", "both"), default="both")
    parser.add_argument("--replay", type=Path, default=None, help="replay these caches (simulation_mode)")
    parser.add_argument("--timeout", type=int, default=TIMEOUT_S, help="seconds per example and tool")
    args = parser.parse_args()
    tools = ("kt", "launchtune") if args.tool == "both" else (args.tool,)
    out = args.out.resolve()
    rows = []
    for name in args.names:
        for tool in tools:
            row = run_one(name, tool, out, args.replay, args.timeout)
            rows.append(row)
            print(
                json.dumps({k: row[k] for k in ("example", "tool", "seconds", "rc", "last_lines")}),
                flush=True,
            )
            (out / "examples.json").write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    run_main(main)
