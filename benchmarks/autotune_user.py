"""What ``autotune`` reaches on the example convolution (issue 41), in one process on one GPU.

    python3 -m benchmarks.autotune_user --table data/convolution/h100/sweep --out DIR

Runs the worked example's program (``kernels.examples.autotune_convolution``, 4096 x 4096 image, each launch's
answer fed into the next) under these tuners, each with a cache file of its own in DIR:

- seeded: the sweep's picks for this GPU class; 10,000 launches, every launch timed (``time_idle=1``), so the
  share of kernel time at non-optimal configurations is a sum of measured launches, not an estimate;
- untuned: the same program at the default configuration; its checksum must equal every tuned run's;
- the seeded pick against the sweep's best, and the scan's pick against both, re-measured here in
  interleaved rounds (``kernels.compare``: the median ratio and its 95% interval);
- from scratch: ``--scan`` configurations (the default first), 10,000 launches; then the same program again
  with that cache: no tuning launch;
- a change of size mid-run (4096 x 4096, 2048 x 2048, back), seeded, against the untuned run of that schedule;
- seeded with ``verify=True``: the extra launches verify costs and any candidate it rejects.

Writes ``results.json`` and ``summary.md`` into DIR and prints the summary.
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import run_main
from benchmarks.dry_run import done, kernel_space
from launchtune.kernels.compare import compare, interleaved
from launchtune.kernels.examples.autotune_convolution import (
    FILTER,
    SPEC,
    run,
    tuned_convolution,
    untuned_convolution,
)
from launchtune.pipeline.errors import UserError


def launch_timer(config: dict[str, int], problem: tuple[int, int, int], launches: int) -> Any:
    """A function timing ``launches`` back-to-back launches of ``config`` (CUDA events): ms per launch."""
    import cupy as cp

    from launchtune.kernels.kernel.compile import build_function, source_with_defines
    from launchtune.kernels.kernel.spec import load_kernel_spec

    spec = load_kernel_spec(SPEC)
    source = source_with_defines(spec.code, spec.defines(config, problem))
    module, function = build_function(cp, source, spec.compiler_options, spec.kernel_name)
    width, height, _ = problem
    rng = np.random.default_rng(0)
    image = cp.asarray(rng.uniform(0, 1, (height + FILTER - 1, width + FILTER - 1)).astype(np.float32))
    filter_ = cp.asarray(rng.uniform(0, 1, (FILTER, FILTER)).astype(np.float32))
    cp.ndarray(filter_.shape, filter_.dtype, module.get_global("d_filter"))[...] = filter_
    out = cp.zeros((height, width), cp.float32)
    args = (out, image, filter_, np.int32(width), np.int32(height))
    grid, block = spec.grid(config, problem), spec.block(config)
    function(grid, block, args)  # warm-up

    def once() -> float:
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(launches):
            function(grid, block, args)
        stop.record()
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop) / launches

    return once


def against(
    a: dict[str, int], b: dict[str, int], problem: tuple[int, int, int], rounds: int
) -> dict[str, Any]:
    ta, tb = launch_timer(a, problem, 30), launch_timer(b, problem, 30)
    a_ms, b_ms = interleaved(ta, tb, rounds)
    c = compare(a_ms, b_ms)
    return {"a_ms": float(np.median(a_ms)), "b_ms": float(np.median(b_ms)), **c.as_dict(), "text": c.text()}


def tuned_run(sizes, out: Path, name: str, **options: Any) -> tuple[dict[str, Any], Any]:
    kernel = tuned_convolution(cache=out / f"cache_{name}.json", time_idle=1, **options)
    result = run(kernel, sizes)
    result["tuning"] = kernel.stats()
    kernel.close()
    return result, kernel


def dry_run(table: str) -> int:
    """The kernel spec at 4096 x 4096 and the table's picks for each GPU class it holds, read as the tuner
    reads them (``table_seeds``), without a GPU."""
    from launchtune.kernels.tuning_table import TableError, read, table_file, table_seeds

    default = kernel_space(SPEC, "4096x4096").default
    try:
        classes = sorted({e["gpu_class"] for e in read(table_file(table))["entries"]})
        seeds = {c: len(table_seeds(table, c, "4096x4096", default).configs) for c in classes}
    except TableError as exc:
        raise UserError(f"--table: {exc}") from None
    return done("benchmarks.autotune_user", f"{table}: picks per GPU class {seeds}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", required=True, help="the sweep folder whose picks seed the tuner")
    parser.add_argument("--out", required=True, help="folder for results.json, summary.md, caches")
    parser.add_argument("--launches", type=int, default=10_000)
    parser.add_argument("--scan", type=int, default=64, help="configurations of the from-scratch scan")
    parser.add_argument("--rounds", type=int, default=21, help="interleaved rounds of each comparison")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: check the table and the spec, stop")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.dry_run:
        return dry_run(args.table)
    from launchtune.kernels.backend import get_backend
    from launchtune.kernels.device import describe_device
    from launchtune.kernels.tuning_table import best_for

    gpu_class = describe_device(get_backend("cupy"))["gpu_class"]
    best = best_for(args.table, gpu_class)  # the sweep folder's table: its pick for this class, if any
    sweep_best = best.config if best.tuned else None
    problem = (4096, 4096, 1)
    full = [(4096, 4096, args.launches)]
    third = args.launches * 3 // 10
    schedule = [(4096, 4096, third), (2048, 2048, third), (4096, 4096, third)]
    r: dict[str, Any] = {
        "launches": args.launches,
        "scan": args.scan,
        "table": args.table,
        "gpu_class": gpu_class,
    }
    t0 = time.perf_counter()

    def locked(name: str) -> dict[str, int]:
        (st,) = r[name]["tuning"].values()
        return st["config"]

    def shapes() -> dict[str, Any]:
        kernel = tuned_convolution(cache=out / "cache_shapes.json", time_idle=1, table=args.table, log=True)
        result = run(kernel, schedule)
        result["tuning"] = kernel.stats()
        back = [row for row in kernel.log.rows if row[2] > 2 * third]  # launches after the return
        result["after_return"] = {
            "launches_logged": len(back),
            "states": sorted({row[3] for row in back}),
            "configs": sorted({tuple(row[4]) for row in back}),
        }
        kernel.close()
        return result

    sections = [
        ("seeded", lambda: tuned_run(full, out, "seeded", table=args.table)[0]),
        ("untuned", lambda: run(untuned_convolution(), full)),
        ("seeded_vs_sweep_best", lambda: against(sweep_best, locked("seeded"), problem, args.rounds)),
        ("scratch", lambda: tuned_run(full, out, "scratch", scan=args.scan)[0]),
        ("scratch_vs_sweep_best", lambda: against(sweep_best, locked("scratch"), problem, args.rounds)),
        ("scratch_again", lambda: tuned_run(full, out, "scratch", scan=args.scan)[0]),  # the cache
        ("shapes", shapes),
        ("shapes_untuned", lambda: run(untuned_convolution(), schedule)),
        ("verify", lambda: tuned_run([(4096, 4096, 2000)], out, "verify", table=args.table, verify=True)[0]),
        ("verify_untuned", lambda: run(untuned_convolution(), [(4096, 4096, 2000)])),
    ]
    if sweep_best is None:  # the table has no entry for this card's class: no sweep best to compare with
        r["sweep_best"] = f"none: {args.table} has no {gpu_class} entry"
        print(r["sweep_best"], flush=True)
        sections = [s for s in sections if not s[0].endswith("_vs_sweep_best")]
    for name, work in sections:
        try:  # one section's failure is recorded, and the others still run
            r[name] = work()
        except Exception:  # noqa: BLE001
            r[name] = {"error": traceback.format_exc()}
            print(f"{name} failed:\n{r[name]['error']}", flush=True)
        print(f"{name} done ({time.perf_counter() - t0:.0f} s)", flush=True)
        r["seconds"] = round(time.perf_counter() - t0, 1)
        (out / "results.json").write_text(json.dumps(r, indent=1, default=str) + "\n")
    try:
        summary = render(r)
    except Exception:  # noqa: BLE001
        summary = "render failed:\n" + traceback.format_exc()
    (out / "summary.md").write_text(summary)
    print(summary)
    failed = [name for name, _ in sections if "error" in r[name]]
    if failed:  # each ran on (its record is in results.json); the exit code still says what failed
        print(f"failed sections: {', '.join(failed)}", flush=True)
    return 1 if failed else 0


def render(r: dict[str, Any]) -> str:
    def one(result: dict[str, Any]) -> dict[str, Any]:
        (s,) = result["tuning"].values()
        return s

    s, sc, ag, v = one(r["seeded"]), one(r["scratch"]), one(r["scratch_again"]), one(r["verify"])
    head = [
        "run",
        "locked at launch",
        "configuration",
        "non-optimal launches",
        "their ms",
        "share of kernel ms",
    ]
    head += ["excess ms", "kernel ms", "checksum"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    runs = [("seeded", s, r["seeded"]), ("from scratch", sc, r["scratch"])]
    runs += [("again, cached", ag, r["scratch_again"]), ("seeded, verify", v, r["verify"])]
    for name, st, result in runs:
        share = st["nonoptimal_ms"] / st["kernel_ms"] if st["kernel_ms"] else 0.0
        c = st["config"]
        short = f"{c['block_size_x']}x{c['block_size_y']} tile {c['tile_size_x']}x{c['tile_size_y']}"
        short += f" ro {c['read_only']} pad {c['use_padding']} shmem {c['use_shmem']}"
        cells = [name, st["locked_at_launch"], short, st["nonoptimal_launches"], f"{st['nonoptimal_ms']:.2f}"]
        cells += [f"{100 * share:.3f}%", f"{st['excess_ms'] or 0:.2f}", f"{st['kernel_ms']:.1f}"]
        cells += [result["checksum"]]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    lines.append(f"| untuned | - | default | - | - | - | - | - | {r['untuned']['checksum']} |")
    lines.append("")
    if isinstance(r.get("sweep_best"), str):
        lines.append(f"- sweep best: {r['sweep_best']}")
    for key in ("seeded_vs_sweep_best", "scratch_vs_sweep_best"):
        if key in r and "error" not in r[key]:
            c = r[key]
            lines.append(f"- {key}: {c['b_ms']:.4f} ms against {c['a_ms']:.4f} ms: {c['text']}")
    lines.append(f"- from scratch: {sc['candidates']} candidates, seed: {sc['seed']}")
    lines.append(
        f"- again with the cache: cache {ag['cache']}, scans {ag['scans_finished']}, "
        f"non-optimal launches {ag['nonoptimal_launches']}"
    )
    sh = r["shapes"]
    for key, st in sh["tuning"].items():
        lines.append(
            f"- shapes {key}: scans {st['scans_finished']}, locked at launch {st['locked_at_launch']}, "
            f"launches {st['launches']}, non-optimal {st['nonoptimal_launches']}"
        )
    lines.append(f"- after the return to 4096x4096: {sh['after_return']}")
    lines.append(f"- shapes checksum {sh['checksum']}, untuned {r['shapes_untuned']['checksum']}")
    lines.append(
        f"- verify: {v['verify_launches']} extra launches, rejected {v['rejected']}, checksum "
        f"{r['verify']['checksum']} (untuned {r['verify_untuned']['checksum']})"
    )
    lines.append(
        f"- wall: seeded {r['seeded']['wall_s']} s, untuned {r['untuned']['wall_s']} s, scratch "
        f"{r['scratch']['wall_s']} s, again {r['scratch_again']['wall_s']} s; compile waits: seeded "
        f"{s['compile_wait_s']} s, scratch {sc['compile_wait_s']} s"
    )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    run_main(main)
