"""Why Kernel Tuner and the ``kernel`` workload time one configuration differently, on this GPU (issue 44).

    python -m benchmarks.timing_parity --out DIR [--rounds 5] [--configs 4] [--idle-s 1.0] [--seed 0]

For each shipped example (heat, convolution): the default configuration and ``--configs`` more drawn from
its space (seeded), each measured in ``--rounds`` interleaved rounds (the protocols' order rotates every
round), on one compiled kernel and the same arguments, under every protocol:

  loop          what a production time loop sees: 200 launches queued between two CUDA events, per launch
  ours          the ``kernel`` workload's figure (``Workload.run``: one warm-up launch, then 7 launches
                queued, each between its own events; the median)
  alone         one warm-up launch, then 7 launches each alone (synchronise, event, launch, event,
                synchronise); the median
  kt_warm       Kernel Tuner 1.5's protocol (``core.benchmark_default``) on a busy GPU: no warm-up, 7 launches
                each alone, the host polling the stop event with ``sleep(1e-6)``; the mean
  kt_idle       the same after the GPU idled ``--idle-s`` seconds (as it does while Kernel Tuner compiles the
                next configuration); ``kt_idle_first`` is that protocol's first launch alone
  kernel_tuner  Kernel Tuner 1.5 itself: ``tune_kernel(lang="cupy")`` on this one configuration (its
                ``time``: it compiles, then runs ``kt_warm``'s protocol)

and, for the heat example (no ``__constant__`` memory to fill), the ``loop`` figure of the same source
compiled two other ways: ``nvrtc_kt`` (NVRTC with Kernel Tuner's CuPy options, ``--std=c++11`` added) and
``nvcc`` (``nvcc -O3 -arch=sm_XX -cubin``, a production build, loaded from the cubin). The SM clock (NVML,
read only) is sampled before and after each ``kt_idle``.

Writes ``DIR/parity.json`` (every measurement) and ``DIR/parity.md`` (each protocol over ``loop``: the median
over configurations and rounds with a bootstrap 95% interval).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import run_main
from launchtune.kernels.compare import bootstrap_interval
from launchtune.kernels.kernel.compile import source_with_defines
from launchtune.kernels.kernel.workload import make_workload

EXAMPLES = {"heat": "heat.yaml", "convolution": "convolution.yaml"}
LOOP = 200  # launches queued for the production-loop figure
REPEATS = 7  # both tools' default


def sm_clock() -> int | None:
    """The SM clock in MHz (NVML, read only), None where NVML is absent."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM))
    except Exception:  # noqa: BLE001  (a reading, never a reason to stop)
        return None


def loop_ms(cp: Any, launch: Callable[[], None], n: int = LOOP) -> float:
    launch()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(n):
        launch()
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop) / n


def alone_ms(cp: Any, launch: Callable[[], None], warmup: bool, poll: bool) -> list[float]:
    """``REPEATS`` launches each alone; ``poll`` waits as Kernel Tuner does (query the stop event, sleep)."""
    device = cp.cuda.Device()
    if warmup:
        launch()
    device.synchronize()
    times = []
    for _ in range(REPEATS):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        device.synchronize()
        start.record()
        launch()
        stop.record()
        if poll:
            while not stop.done:
                time.sleep(1e-6)
        device.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return times


def kernel_tuner_ms(workload: Any, config: dict[str, int]) -> float:
    import kernel_tuner

    arguments = workload.kernel_tuner_arguments()
    for unchecked in ("answer", "atol"):  # checking is not timed; the GPU tests check these kernels
        arguments.pop(unchecked, None)
    arguments["tune_params"] = {
        n: [v for v in values if workload.spec.index_of(n, v) == config[n]]
        for n, values in arguments["tune_params"].items()
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = kernel_tuner.tune_kernel(**arguments, iterations=REPEATS, quiet=True, verbose=False)
    return float(results[0]["time"])


def compiled_elsewise(cp: Any, workload: Any, config: dict[str, int], how: str, tmp: Path) -> Any:
    """The heat kernel of ``config`` compiled by NVRTC with Kernel Tuner's options, or by nvcc to a cubin."""
    spec = workload.spec
    source = source_with_defines(spec.code, spec.defines(config, workload.problem))
    if how == "nvrtc_kt":
        options = ("--std=c++11", *spec.compiler_options)
        return cp.RawModule(code=source, options=options).get_function(spec.kernel_name)
    arch = f"sm_{cp.cuda.Device().compute_capability}"
    cu, cubin = tmp / "k.cu", tmp / f"k_{abs(hash(source))}.cubin"
    cu.write_text(source)
    subprocess.run(
        ["nvcc", "-O3", f"-arch={arch}", "-cubin", *spec.compiler_options, "-o", str(cubin), str(cu)],
        check=True,
        capture_output=True,
    )
    return cp.RawModule(path=str(cubin)).get_function(spec.kernel_name)


def measure_example(name: str, args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    import cupy as cp

    spec = str(files("launchtune.kernels.examples").joinpath(EXAMPLES[name]))
    w = make_workload(name, None, "cupy", spec=spec)
    space = w.space()
    pool = [c for c in space.grid() if c != space.default]
    configs = [dict(space.default)] + random.Random(args.seed).sample(pool, args.configs)
    rows = []
    for config in configs:
        if not w.check(config).ok:
            print(f"{name} {config}: check failed, skipped", flush=True)
            continue
        launch = w.launcher(config)
        others = {}
        if name == "heat":
            for how in ("nvrtc_kt", "nvcc"):
                fn = compiled_elsewise(cp, w, config, how, tmp)
                others[how] = w.launcher(config, function=fn)
        rows.append({"config": config, "launch": launch, "others": others, "times": {}})
    protocols = ["loop", "ours", "alone", "kt_warm", "kt_idle", "kernel_tuner", *rows[0]["others"]]
    for r in range(args.rounds):
        order = protocols[r % len(protocols) :] + protocols[: r % len(protocols)]
        for row in rows:
            launch, got = row["launch"], {}
            for p in order:
                if p == "loop":
                    got[p] = loop_ms(cp, launch)
                elif p == "ours":
                    got[p] = w.run(row["config"], REPEATS).total
                elif p == "alone":
                    got[p] = float(np.median(alone_ms(cp, launch, warmup=True, poll=False)))
                elif p == "kt_warm":
                    got[p] = float(np.mean(alone_ms(cp, launch, warmup=False, poll=True)))
                elif p == "kt_idle":
                    time.sleep(args.idle_s)
                    before = sm_clock()
                    times = alone_ms(cp, launch, warmup=False, poll=True)
                    got.update(kt_idle=float(np.mean(times)), kt_idle_first=times[0])
                    got.update(clock_idle_mhz=before, clock_after_mhz=sm_clock())
                elif p == "kernel_tuner":
                    got[p] = kernel_tuner_ms(w, row["config"])
                else:
                    got[p] = loop_ms(cp, row["others"][p])
            for k, v in got.items():
                row["times"].setdefault(k, []).append(v)
        print(f"{name}: round {r + 1}/{args.rounds} done", flush=True)
    return [{"example": name, "config": row["config"], "times": row["times"]} for row in rows]


def ratio_row(example: str, label: str, rows: list[dict[str, Any]], num: str, den: str) -> str:
    """One table row: ``num`` over ``den``, every configuration and round, the median [bootstrap 95%]."""
    ratios = np.array([a / b for r in rows for a, b in zip(r["times"][num], r["times"][den], strict=True)])
    low, high = bootstrap_interval(ratios, np.median)
    return f"| {example} | {label} | {np.median(ratios):.3f} [{low:.3f}, {high:.3f}] | {ratios.size} |"


def summary(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| example | protocol | over `loop`: median [95%] | configurations x rounds |",
        "| --- | --- | ---: | ---: |",
    ]
    for example in EXAMPLES:
        mine = [r for r in rows if r["example"] == example]
        if not mine:
            continue
        names = [k for k in mine[0]["times"] if k != "loop" and not k.startswith("clock")]
        lines += [ratio_row(example, f"`{p}`", mine, p, "loop") for p in names]
        lines.append(ratio_row(example, "`kernel_tuner` over `ours`", mine, "kernel_tuner", "ours"))
        idle = [c for r in mine for c in r["times"]["clock_idle_mhz"] if c is not None]
        after = [c for r in mine for c in r["times"]["clock_after_mhz"] if c is not None]
        if idle:
            clocks = f"{int(np.median(idle))} / {int(np.median(after))}"
            lines.append(
                f"| {example} | SM clock MHz after idling / after `kt_idle` | {clocks} | {len(idle)} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--configs", type=int, default=4, help="configurations drawn beside the default")
    p.add_argument("--idle-s", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--examples", default="heat,convolution")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.examples.split(","):
            rows += measure_example(name, args, Path(tmp))
            (args.out / "parity.json").write_text(json.dumps(rows, indent=1))
    table = summary(rows)
    (args.out / "parity.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    run_main(main)
