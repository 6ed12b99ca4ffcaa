"""Kernel Tuner caches as GPU classes of a combined folder: GPUs measured by someone else, on hardware we will
never own (the FAIR Benchmark Hub's brute-forced spaces), trained on beside our own sweeps.

A cache file (``.json`` or ``.json.gz``, read by :func:`pipeline.store.datasets.load_kernel_tuner_cache`,
the one reader of the format) becomes one class: its GPU's class name from the device name it records (or
its file name: the hub's MI250X cache records none) through ``kernels.device.gpu_class_of``, and that
class's data-sheet facts from the one GPU registry (``kernels.device.CLASS_SPECS``) in every row, where a
sweep's worker writes its own. A GPU the registry lacks is refused: without its facts the combined models
could not tell it from another. Its rows take the merged data's column names: one row per recorded
configuration, ``ok`` with its ``time`` as ``total_ms``, ``invalid`` where Kernel Tuner recorded a failure
(it did not compile or did not run on that GPU), ``sampler`` ``kernel_tuner_cache``; what a cache does not
record (host, worker, the measured copy bandwidth) stays null.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from launchtune.kernels.device import CLASS_SPECS, gpu_class_of
from launchtune.kernels.objective import DEFAULT as TIME_OBJECTIVE
from launchtune.kernels.objective import Objective

from ..errors import UserError
from .datasets import STATUS, TIME, load_kernel_tuner_cache
from .folder import Plan

SAMPLER = "kernel_tuner_cache"
FAILED_REASON = "Kernel Tuner recorded no time (the configuration failed to compile or run on this GPU)"


@dataclass
class CacheClass:
    """One cache file as a GPU class: its rows in the merged data's columns and what it says of itself."""

    path: Path
    gpu_class: str
    device_name: str
    kernel_name: str
    problem_size: str  # "4096x4096", as a sweep spec writes a size
    params: dict[str, list[int]]  # every tuned parameter (the single-valued too) and its recorded values
    frame: pd.DataFrame
    objective: Objective = TIME_OBJECTIVE  # what its ``total_ms`` column is the cost of

    def plan(self) -> Plan:
        """The slim ``plan/<class>.json`` of a combined folder: the cache's own facts."""
        return Plan(
            params=list(self.params),
            values=self.params,
            default=None,
            kernels=[],
            n_configs=int(len(self.frame)),
            device=device_facts(self.gpu_class, self.device_name),
            source=str(self.path),
            kernel_name=self.kernel_name,
            problem_size=self.problem_size,
        )


def is_cache_path(path: Path) -> bool:
    """A cache file, or a folder of them that is not a sweep folder."""
    if path.is_file():
        return path.name.endswith((".json", ".json.gz"))
    return path.is_dir() and not (path / "sweep.json").exists() and bool(cache_files(path))


def cache_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith((".json", ".json.gz")))


def device_facts(gpu_class: str, device_name: str) -> dict[str, Any]:
    """The registry's data sheet of a class, as a combined folder records each source's device."""
    spec = CLASS_SPECS[gpu_class]
    return {
        "device_name": device_name,
        "device_class": gpu_class,
        "backend": "kernel_tuner_cache",
        "sm_count": spec.sm_count,
        "peak_fp64_gflops": spec.peak_fp64_gflops,
        "peak_fp32_gflops": spec.peak_fp32_gflops,
        "spec_bandwidth_gbs": spec.bandwidth_gbs,
        "spec_memory_gb": spec.memory_gb,
        "llc_mb": spec.llc_mb,
        "vendor": spec.vendor,
        "measured_bandwidth_gbs": None,
        "source": f"kernels/device.py CLASS_SPECS[{gpu_class!r}]: {spec.source}",
    }


def read_cache_class(path: Path) -> CacheClass:
    dataset = load_kernel_tuner_cache(path)
    device_name = str(dataset.device.get("device_name") or dataset.name)
    gpu_class = gpu_class_of(device_name)
    if gpu_class not in CLASS_SPECS:
        gpu_class = gpu_class_of(dataset.name)
    if gpu_class not in CLASS_SPECS:
        raise UserError(
            f"{path}: GPU {device_name!r} is not in the GPU registry (kernels/device.py CLASS_SPECS); add "
            "its data-sheet facts there so the combined models can tell it from the others"
        )
    spec = CLASS_SPECS[gpu_class]
    raw = dataset.frame
    n = len(raw)
    ok = (raw[STATUS] == "ok").to_numpy()
    frame = pd.DataFrame(
        {
            "sweep_id": path.name.split(".")[0],
            "sample_id": np.arange(n, dtype=np.int64),
            "sampler": SAMPLER,
            "workload": SAMPLER,
            "case": str(dataset.device.get("kernel_name") or ""),
            "size": _size(dataset.device.get("problem_size")),
            "backend": SAMPLER,
            "gpu_class": gpu_class,
            "device_class": gpu_class,
            "device_name": device_name,
            "sm_count": spec.sm_count,
            "peak_fp64_gflops": float(spec.peak_fp64_gflops),
            "spec_bandwidth_gbs": float(spec.bandwidth_gbs),
            "spec_memory_gb": float(spec.memory_gb),
            "measured_bandwidth_gbs": np.nan,
            "status": np.where(ok, "ok", "invalid"),
            "reason": np.where(ok, "", FAILED_REASON),
            "repeats": [len(t) for t in raw["times"]],
            "total_ms": raw[TIME].to_numpy(float),
        }
    )
    params: dict[str, list[int]] = {}
    for p in dataset.params:
        frame[p] = raw[p].astype(np.int64).to_numpy()
        params[p] = sorted(int(v) for v in raw[p].unique())
    for p, value in dataset.device.get("constants", {}).items():
        if isinstance(value, bool) or not isinstance(value, int):
            continue  # a constant that is no integer (a string option) cannot be a parameter column
        frame[p] = np.int64(value)
        params[p] = [int(value)]
    return CacheClass(
        path=path,
        gpu_class=gpu_class,
        device_name=device_name,
        kernel_name=str(dataset.device.get("kernel_name") or ""),
        problem_size=_size(dataset.device.get("problem_size")),
        params=params,
        frame=frame,
        objective=dataset.objective,
    )


def read_caches(path: Path) -> list[CacheClass]:
    """Every cache of a cache file or a folder of them, one class each (two of one GPU are refused)."""
    files = [path] if path.is_file() else cache_files(path)
    found = [read_cache_class(f) for f in files]
    seen: dict[str, Path] = {}
    for c in found:
        if c.gpu_class in seen:
            raise UserError(
                f"{c.path}: GPU class {c.gpu_class!r} is also in {seen[c.gpu_class]}; each class must come "
                "from one source"
            )
        seen[c.gpu_class] = c.path
    return found


def _size(problem_size: Any) -> str:
    if isinstance(problem_size, list | tuple):
        return "x".join(str(v) for v in problem_size)
    return "" if problem_size is None else str(problem_size)
