"""Small recorded datasets in both forms the replay reads: a Kernel Tuner cache and our sweep Parquet."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


def cache_time(bx: int, by: int, tile: int, gpu_shift: float = 0.0) -> float:
    """A bowl with its minimum at bx=64, by=4, tile=2 (moved by gpu_shift), plus a ripple."""
    return (
        1.0
        + 0.3 * (np.log2(bx) - 6 - gpu_shift) ** 2
        + 0.2 * (np.log2(by) - 2) ** 2
        + 0.4 * (tile - 2) ** 2
        + 0.05 * ((bx // 16) % 3)
    )


def write_cache(path: Path, device: str, gpu_shift: float = 0.0, seed: int = 0) -> Path:
    """A Kernel Tuner cache of 5 x 4 x 3 = 60 configurations (one failed), 8 repeated times each."""
    rng = np.random.default_rng(seed)
    cache = {}
    for bx, by, tile in itertools.product([16, 32, 64, 128, 256], [1, 2, 4, 8], [1, 2, 3]):
        entry = {"block_size_x": bx, "block_size_y": by, "tile": tile, "use_cmem": 1}
        if (bx, by, tile) == (256, 8, 3):
            entry["time"] = "RuntimeFailedConfig"
        else:
            t = cache_time(bx, by, tile, gpu_shift)
            times = t * (1 + 0.01 * rng.standard_normal(8))
            entry["times"] = [float(v) for v in times]
            entry["time"] = float(np.mean(times))
        cache[",".join(str(entry[k]) for k in ("block_size_x", "block_size_y", "tile", "use_cmem"))] = entry
    raw = {
        "device_name": device,
        "kernel_name": "toy",
        "problem_size": [64, 64],
        "tune_params_keys": ["block_size_x", "block_size_y", "tile", "use_cmem"],
        "tune_params": {},
        "objective": "time",
        "cache": cache,
    }
    with gzip.open(path, "wt") as f:
        json.dump(raw, f)
    return path


@pytest.fixture
def cache_file(tmp_path: Path) -> Path:
    return write_cache(tmp_path / "A100.json.gz", "NVIDIA A100-PCIE-40GB")


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    d = tmp_path / "caches"
    d.mkdir()
    for i, (name, device) in enumerate(
        [("A100", "NVIDIA A100-PCIE-40GB"), ("A4000", "NVIDIA RTX A4000"), ("W6600", "AMD Radeon PRO W6600")]
    ):
        write_cache(d / f"{name}.json.gz", device, gpu_shift=0.5 * i, seed=i)
    return d


KERNEL_BEST = {"flux": (200, 128), "update": (400, 64)}
BLOCKS, THREADS = [100, 200, 300, 400], [32, 64, 128]
DEFAULT = {"flux.blocks": 100, "flux.threads": 32, "update.blocks": 100, "update.threads": 32}


def kernel_ms(kernel: str, blocks: int, threads: int) -> float:
    b, t = KERNEL_BEST[kernel]
    return 0.5 + 0.001 * abs(blocks - b) + 0.2 * abs(np.log2(threads / t))


def write_sweep(
    path: Path,
    n_random: int = 10,
    seed: int = 0,
    default: dict[str, int] | None = None,
    gpu_class: str = "h100",
    device_name: str = "NVIDIA H100 80GB HBM3",
) -> Path:
    """Our sweep's Parquet form: per-kernel exhaustive rows (2 kernels x 12) plus random rows, one failed.

    ``default`` holds the other kernels still while one is swept; the paper's sweep has its default ("one
    thread per cell", 13,312 blocks) outside the grid, so that no recorded row is the all-default launch."""
    rng = np.random.default_rng(seed)
    default = DEFAULT if default is None else default
    rows = []

    def row(config: dict, sampler: str, status: str = "ok") -> dict:
        ms = {k: kernel_ms(k, config[f"{k}.blocks"], config[f"{k}.threads"]) for k in KERNEL_BEST}
        noise = 1 + 0.002 * rng.standard_normal()
        total = (sum(ms.values()) + 0.1) * noise
        return {
            **config,
            "sampler": sampler,
            "status": status,
            "gpu_class": gpu_class,
            "device_name": device_name,
            "total_ms": total if status == "ok" else np.nan,
            **{f"ms.{k}": (v * noise if status == "ok" else np.nan) for k, v in ms.items()},
        }

    for kernel in KERNEL_BEST:
        for b, t in itertools.product(BLOCKS, THREADS):
            rows.append(
                row({**default, f"{kernel}.blocks": b, f"{kernel}.threads": t}, "per_kernel_exhaustive")
            )
    for i in range(n_random):
        config = {p: int(rng.choice(BLOCKS if p.endswith("blocks") else THREADS)) for p in DEFAULT}
        rows.append(row(config, "random", "failed" if i == 0 else "ok"))
    df = pd.DataFrame(rows)
    for p in DEFAULT:
        df[p] = df[p].astype("int64")
    df.to_parquet(path, index=False)
    return path


@pytest.fixture
def sweep_file(tmp_path: Path) -> Path:
    return write_sweep(tmp_path / "sweep.parquet")
