"""How long building a space's valid configurations takes: ours (``Space.rows``, ``Space.grid``) against
Kernel Tuner 1.5's ``Searchspace`` (python-constraint2), in one process, on the same spaces and restrictions.

    python -m benchmarks.space_enumeration --repeats 3 --out data/space_enumeration

Spaces (Kernel Tuner's own stencil spaces, restrictions as Kernel Tuner's scripts write them):

* ``hotspot``: the temporal-tiling stencil of Kernel Tuner's hotspot benchmark (10 parameters, 22.2 million
  combinations, its five restrictions for a 1024-thread, 48 KiB, 100 KiB-per-SM card);
* ``hotspot4``: the same with its first four restrictions only;
* ``stencil3d``: a generic 3-D stencil (block and tile sizes in x, y, z, shared memory on or off, a z loop
  unrolled by a divisor of its tile; 3.45 million combinations), restricted to 32..1024 threads, 48 KiB of
  shared memory and whole unrolls.

Ours is built the way a user's restrictions reach it: a kernel spec (``spec_from_mapping``) whose
``space()`` holds the restrictions as constraints. Each figure is the median of ``--repeats`` builds; both
tools must agree on the number of valid configurations (and ours on the set, where Kernel Tuner's is listed),
else the script fails.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import run_main
from launchtune.kernels.kernel.spec import spec_from_mapping

DEV = {"max_threads": 1024, "max_shared_memory_per_block": 49152, "max_shared_memory": 102400}


def hotspot(restrictions: int = 5) -> tuple[dict[str, list[int]], list[str], dict[str, int]]:
    tp: dict[str, list[int]] = {
        "block_size_x": [1, 2, 4, 8, 16] + [32 * i for i in range(1, 33)],
        "block_size_y": [2**i for i in range(6)],
        "tile_size_x": list(range(1, 11)),
        "tile_size_y": list(range(1, 11)),
        "temporal_tiling_factor": list(range(1, 11)),
        "max_tfactor": [10],
        "loop_unroll_factor_t": list(range(1, 11)),
        "sh_power": [0, 1],
        "blocks_per_sm": [0, 1, 2, 3, 4],
    }
    smem = (
        "(block_size_x*tile_size_x + temporal_tiling_factor * 2) * "
        "(block_size_y*tile_size_y + temporal_tiling_factor * 2) * (2+sh_power) * 4"
    )
    rules = [
        "block_size_x*block_size_y >= 32",
        "temporal_tiling_factor % loop_unroll_factor_t == 0",
        f"block_size_x*block_size_y <= {DEV['max_threads']}",
        f"{smem} <= {DEV['max_shared_memory_per_block']}",
        f"blocks_per_sm == 0 or (({smem}) * blocks_per_sm <= {DEV['max_shared_memory']})",
    ][:restrictions]
    default = {n: v[0] for n, v in tp.items()} | {"block_size_x": 32}
    return tp, rules, default


def stencil3d() -> tuple[dict[str, list[int]], list[str], dict[str, int]]:
    tp: dict[str, list[int]] = {
        "block_size_x": [1, 2, 4, 8, 16] + [32 * i for i in range(1, 33)],
        "block_size_y": [2**i for i in range(6)],
        "block_size_z": [2**i for i in range(6)],
        "tile_size_x": list(range(1, 7)),
        "tile_size_y": list(range(1, 7)),
        "tile_size_z": list(range(1, 7)),
        "use_shmem": [0, 1],
        "loop_unroll_factor_z": list(range(1, 7)),
    }
    rules = [
        "32 <= block_size_x * block_size_y * block_size_z <= 1024",
        "use_shmem == 0 or (block_size_x * tile_size_x + 2) * (block_size_y * tile_size_y + 2)"
        " * (block_size_z * tile_size_z + 2) * 4 <= 49152",
        "tile_size_z % loop_unroll_factor_z == 0",
    ]
    default = {n: v[0] for n, v in tp.items()} | {"block_size_x": 32}
    return tp, rules, default


SPACES = {"hotspot": lambda: hotspot(5), "hotspot4": lambda: hotspot(4), "stencil3d": stencil3d}


def ours(tp: dict[str, list[int]], rules: list[str], default: dict[str, int], dicts: bool) -> Any:
    spec = spec_from_mapping(
        {
            "source": "k.cu",
            "kernel_name": "k",
            "tune_params": tp,
            "restrictions": rules,
            "default": default,
            "problem_size": [4096, 4096],
        },
        Path("benchmark.yaml"),
        code="__global__ void k() {}",
        need_arguments=False,
    )
    space = spec.space((4096, 4096, 1))
    return list(space.grid()) if dicts else space.rows()


def theirs(tp: dict[str, list[int]], rules: list[str]) -> Any:
    from kernel_tuner.searchspace import Searchspace

    return Searchspace(tp, rules, DEV["max_threads"])


def timed(fn: Any, repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spaces", default=",".join(SPACES), help="comma-separated: " + ", ".join(SPACES))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="folder for table.md and results.json")
    args = ap.parse_args(argv)
    import kernel_tuner

    rows = []
    for name in args.spaces.split(","):
        tp, rules, default = SPACES[name]()
        t_rows, ours_rows = timed(lambda tp=tp, r=rules, d=default: ours(tp, r, d, False), args.repeats)
        t_dicts, _ = timed(lambda tp=tp, r=rules, d=default: ours(tp, r, d, True), args.repeats)
        t_kt, kt = timed(lambda tp=tp, r=rules: theirs(tp, r), args.repeats)
        kt_set = {tuple(int(v) for v in c) for c in kt.list}
        our_set = set(map(tuple, ours_rows.tolist()))
        if kt.size != len(ours_rows) or kt_set != our_set:
            raise SystemExit(
                f"{name}: Kernel Tuner has {kt.size:,} valid, ours {len(ours_rows):,} (or sets differ)"
            )
        rows.append(
            {
                "space": name,
                "parameters": len(tp),
                "combinations": math.prod(len(v) for v in tp.values()),
                "valid": len(ours_rows),
                "ours_rows_s": round(t_rows, 3),
                "ours_grid_s": round(t_dicts, 3),
                "kernel_tuner_s": round(t_kt, 3),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    lines = [
        "| space | parameters | combinations | valid | ours, rows (s) | ours, as dicts (s) "
        "| Kernel Tuner (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ] + [
        f"| {r['space']} | {r['parameters']} | {r['combinations']:,} | {r['valid']:,} "
        f"| {r['ours_rows_s']:.3f} "
        f"| {r['ours_grid_s']:.3f} | {r['kernel_tuner_s']:.3f} |"
        for r in rows
    ]
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        meta = {
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "kernel_tuner": kernel_tuner.__version__ if hasattr(kernel_tuner, "__version__") else "",
            "cpus": os.cpu_count(),
            "load": [round(x, 2) for x in os.getloadavg()],
            "repeats": args.repeats,
        }
        (args.out / "results.json").write_text(json.dumps({"meta": meta, "spaces": rows}, indent=1) + "\n")
        (args.out / "table.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    run_main(main)
