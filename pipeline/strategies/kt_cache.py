"""A dataset as a Kernel Tuner cache file: what ``launchtune export --format kernel-tuner`` writes, so
Kernel Tuner (its simulation mode) and the Benchmark Hub's tools can run on our sweeps.

Each recorded configuration becomes one entry keyed ``"v1,v2,..."`` (the parameter values in order) with the
parameters, ``time`` = its true value as the replay defines it (the mean of its recorded repeats, else its
recorded time; ``replay.true_values``), ``times`` = the recorded repeats where there are any, and the
per-kernel times of a sweep as extra fields (``ms.<kernel>``); a failed configuration has
``"time": "RuntimeFailedConfig"``, as in Kernel Tuner's own caches. Entries keep the dataset's row order, so
replaying the exported file (``load_kernel_tuner_cache``) answers every strategy as the dataset itself does,
noise included. A dataset ranked by another objective (a kernel spec's metric, energy) writes that objective's
value under its name, ``objective`` naming it and ``objective_higher_is_better`` its direction, with the
time and every metric its rows kept beside it, as Kernel Tuner writes a cache tuned with metrics. What a
cache cannot carry: the per-kernel structure (which parameters launch which kernel) and
the default launch, so ``per_kernel_exhaustive`` and the additive estimate of unrecorded configurations need
the sweep itself.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np

from launchtune.kernels.atomic import atomic_path

from ..errors import UserError
from ..store.datasets import Dataset
from .replay import true_values

FAILED = "RuntimeFailedConfig"


def to_cache(
    dataset: Dataset, times: np.ndarray | None = None, repeats: bool = True, whole: bool = True
) -> dict[str, Any]:
    """The cache as a dict; ``times`` replaces each row's ``time`` (a run's noisy answers, for Kernel Tuner's
    simulation mode); ``repeats=False`` leaves out the repeated times (smaller); ``whole=False`` leaves out
    the problem size and the single-valued parameters a loaded cache set aside (a simulation's own cache)."""
    frame = dataset.frame
    params = list(dataset.params)
    values = true_values(frame) if times is None else np.asarray(times, dtype=float)
    ok = (frame["status"] == "ok").to_numpy() & np.isfinite(values)
    keys = frame[params].to_numpy(dtype=np.int64)
    reps = list(frame["times"]) if "times" in frame else [np.empty(0)] * len(frame)
    kernel_cols = {k: frame[c].to_numpy(dtype=float) for k, c in dataset.kernel_times.items()}
    goal = dataset.objective
    measures = {k: frame[c].to_numpy(dtype=float) for k, c in dataset.measures.items() if k != goal.name}
    # the single-valued parameters a loaded cache set aside (``constants``), written back as it had them
    constants = {
        k: v
        for k, v in dict(dataset.device.get("constants") or {}).items()
        if whole and k not in params and isinstance(v, int | float | str)
    }
    entries: dict[str, dict[str, Any]] = {}
    for i, key in enumerate(keys):
        entry: dict[str, Any] = {**constants, **{p: int(v) for p, v in zip(params, key, strict=True)}}
        if ok[i]:
            entry[goal.name] = float(values[i]) if goal.is_time else goal.value(float(values[i]))
            for k, col in measures.items():
                if np.isfinite(col[i]):
                    entry[k] = float(col[i])
            if repeats and len(reps[i]) and goal.is_time:
                entry["times"] = [float(t) for t in reps[i]]
            for k, col in kernel_cols.items():
                if np.isfinite(col[i]):
                    entry[f"ms.{k}"] = float(col[i])
        else:
            entry[goal.name] = FAILED
            if not goal.is_time:
                entry["time"] = FAILED
        entries[",".join(str(v) for v in [*constants.values(), *(int(v) for v in key)])] = entry
    size = dataset.device.get("problem_size")
    ok_size = whole and isinstance(size, list) and size and all(type(v) is int and v > 0 for v in size)
    return {
        "device_name": str(dataset.device.get("device_name") or dataset.name),
        "kernel_name": str(dataset.device.get("kernel_name") or dataset.name),
        "problem_size": size if ok_size else [1],
        "tune_params_keys": [*constants, *params],
        "tune_params": {**{k: [v] for k, v in constants.items()}, **{p: dataset.values(p) for p in params}},
        "objective": goal.name,
        **({} if goal.is_time else {"objective_higher_is_better": goal.maximize}),
        "cache": entries,
    }


def write_cache(dataset: Dataset, path: str | Path) -> Path:
    """Write ``dataset`` as a Kernel Tuner cache (``.json``, or gzip-compressed ``.json.gz``), atomically
    (``kernels.atomic``: a killed export leaves the old file or none, never half of one). The gzip header
    carries no time stamp, so the same dataset gives the same bytes."""
    from ..store.ownership import refuse_inside_project_folder

    path = Path(path)
    if not path.name.endswith((".json", ".json.gz")):
        raise UserError(f"{path}: a Kernel Tuner cache file name ends in .json or .json.gz")
    refuse_inside_project_folder(path, "Kernel Tuner cache")
    data = json.dumps(to_cache(dataset)).encode()
    if path.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return path
