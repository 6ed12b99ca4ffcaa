"""Recorded tuning datasets: one table of measured configurations per device, from any source we can read.

Two sources today:

* a **Kernel Tuner cache** (``*.json`` or ``*.json.gz``, the format of the FAIR Benchmark Hub): one entry per
  configuration with its ``objective`` (``time`` in ms unless the cache names another: ``GFLOP/s``,
  ``energy``...), the repeated ``times`` and a non-numeric ``time`` for a failed configuration;
* **our own Parquet** from the sweep pipeline (a file or a directory of shards): one column per launch
  parameter (``<kernel>.blocks``, ``<kernel>.threads``, ...), per-kernel time columns, a total time and a
  ``status``; rows of several GPU classes become one dataset per class.

Every source becomes a :class:`Dataset` so replay, strategies and transfer never care where the data came
from. Its ``time`` column is the objective's cost (``kernels.objective``): lower is better whatever the
objective's direction (a maximised GFLOP/s costs its reciprocal), so everything that ranks reads one number.
The direction of a cache's objective is known for time and energy (lower) and GFLOP/s and GB/s (higher); any
other needs ``--objective NAME:max|min``."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from launchtune.kernels.atomic import atomic_path
from launchtune.kernels.device import CLASS_SPECS, gpu_class_of
from launchtune.kernels.files import DuplicateKey, FileRefused, check_input
from launchtune.kernels.objective import DEFAULT as TIME_OBJECTIVE
from launchtune.kernels.objective import Objective, ObjectiveError, known, normal_name

from ..errors import UserError
from ..jsonio import check_regular, read_json, read_regular_bytes
from ..records import check_record
from . import cache_json
from .schema import OBJECTIVE_COLUMN, OBJECTIVE_META, objective_of

TIME = "time"  # the objective's cost column of every Dataset frame (lower is better; NaN where it failed)
STATUS = "status"  # "ok", "invalid" or "failed"
_PARAMS_META = b"launchtune.params"  # schema metadata key: the parameter columns of a file we wrote
_INACTIVE_META = b"launchtune.inactive"  # schema metadata key: the space's unused-parameter rules, where any

# Parquet column names we accept for the total time, the per-row repeated times and the GPU class, in order of
# preference (the sweep pipeline's schema names them; older or hand-made files may use the others).
_TOTAL_COLUMNS = ("total_ms", "total", "time_ms", "time")
_TIMES_COLUMNS = ("total_times", "times")
_CLASS_COLUMNS = ("gpu_class",)
# A per-kernel time column for kernel K: "K.ms", "K_ms", "ms.K", "time.K", "K.time" (first match wins).
_KERNEL_TIME_PATTERNS = ("{k}.ms", "{k}_ms", "ms.{k}", "time.{k}", "{k}.time")
_LAUNCH_PARAM = re.compile(
    r"^(?P<kernel>[A-Za-z0-9_]+)\.(?P<what>blocks|threads|gang|vector|block_x|block_y|cells_x|cells_y|smem|faces|maxreg|arith)$"
)

# The device facts a transfer model learns from, from the one GPU registry (kernels.device.CLASS_SPECS,
# where each figure's data sheet is cited): peak FP32 TFLOP/s (no tensor or matrix cores), memory bandwidth
# GB/s, SMs or CUs (one MI250X GCD, which is what HIP sees as a device), last-level cache MB, vendor (1 =
# NVIDIA).
HUB_DEVICE_FEATURES = ("fp32_tflops", "bandwidth_gbs", "units", "cache_mb", "nvidia")


@dataclass
class Dataset:
    """Every recorded configuration of one kernel (set) on one device.

    ``frame`` has one row per distinct configuration: the ``params`` columns, ``time`` (the recorded median,
    ms; NaN for a failed configuration), ``status``, the per-kernel time columns named in ``kernel_times``,
    and a ``times`` column of repeated totals (an array per row; empty where none were recorded). ``kernels``
    maps a kernel to the parameters that launch it: when it is non-empty the total is (nearly) the sum of the
    kernels' times and each kernel depends on its own parameters only (the CFD step)."""

    name: str
    params: list[str]
    frame: pd.DataFrame
    kernels: dict[str, list[str]] = field(default_factory=dict)
    kernel_times: dict[str, str] = field(default_factory=dict)  # kernel -> column of its time
    default: dict[str, int] | None = None
    device: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    # kernels.space.Inactive rules as lists, [deciding parameter, its values, parameters unused there]: where
    # the fused CFD space's fusion level leaves the seven kernels' launches (or the tile) unused
    inactive: list[list[Any]] = field(default_factory=list)
    # what ``time`` is the cost of, and the other measured quantities kept: entry name -> frame column
    objective: Objective = TIME_OBJECTIVE
    measures: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> pd.DataFrame:
        return self.frame[self.frame[STATUS] == "ok"]

    @property
    def optimum(self) -> float:
        """The best recorded cost (ms where the objective is time): what every strategy's pick is divided
        by."""
        return float(self.ok[TIME].min())

    def values(self, param: str) -> list[int]:
        return sorted(int(v) for v in self.frame[param].unique())

    def device_vector(self) -> np.ndarray | None:
        """Numeric device facts for combined training (None where this device is unknown)."""
        facts = self.device.get("features")
        if not facts:
            return None
        return np.array([float(facts[k]) for k in HUB_DEVICE_FEATURES])

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "configurations": int(len(self.frame)),
            "ok": int(len(self.ok)),
            "optimum_ms": self.optimum,
            "params": self.params,
            "kernels": list(self.kernels),
            "source": self.source,
            "objective": self.objective.as_dict(),
        }


def device_features(name: str) -> dict[str, float] | None:
    """``HUB_DEVICE_FEATURES`` of the GPU a device name (or a class name) belongs to; None where the registry
    has no complete data sheet for it."""
    spec = CLASS_SPECS.get(gpu_class_of(name))
    if spec is None or None in (spec.peak_fp32_gflops, spec.sm_count, spec.llc_mb, spec.vendor):
        return None
    return dict(
        fp32_tflops=float(spec.peak_fp32_gflops or 0) / 1000,
        bandwidth_gbs=float(spec.bandwidth_gbs),
        units=float(spec.sm_count or 0),
        cache_mb=float(spec.llc_mb or 0),
        nvidia=float(spec.vendor == "nvidia"),
    )


# -------------------------------------------------------------------------------------- Kernel Tuner cache
def cache_objective(raw: dict[str, Any], path: Path, override: Objective | None = None) -> Objective:
    """The objective a cache's entries are ranked by: ``override`` (``--objective``) where given, else the
    cache's ``objective`` (time where absent) with ``objective_higher_is_better`` where the cache says, else
    its known direction; one line where none is known."""
    name = raw.get("objective", "time")
    if isinstance(name, list) and len(name) == 1:  # Kernel Tuner 1.x may write its objectives as a list
        name = name[0]
    if not isinstance(name, str) or not normal_name(name):
        raise UserError(f"{path}: objective {name!r} is not one name"[:300])
    name = normal_name(name)
    if override is not None:
        if override.name != name:
            raise UserError(f"{path}: --objective {override.name!r}, but the cache's objective is {name!r}")
        return override
    higher = raw.get("objective_higher_is_better")
    if isinstance(higher, list) and len(higher) == 1:
        higher = higher[0]
    if isinstance(higher, bool):
        return Objective(name, higher)
    if higher is not None:  # "true", 1, a list: which direction was meant is not known
        raise UserError(
            f"{path}: objective_higher_is_better: must be true or false (got {higher!r}); or pass "
            f"--objective '{name}:max' or '{name}:min'"[:300]
        )
    try:
        return known(name)
    except ObjectiveError as exc:
        raise UserError(f"{path}: {exc}") from None


def load_kernel_tuner_cache(path: str | Path, objective: Objective | None = None) -> Dataset:
    """Read a Kernel Tuner cache file (``.json`` or ``.json.gz``) into a Dataset.

    Parameters that take one value only (``use_cmem``, ``filter_height`` in the convolution cache) are
    constants of the problem, not tuning parameters, and are dropped. A configuration whose ``time`` is not a
    number (``RuntimeFailedConfig``, ``CompilationFailedConfig``, ...) is kept with status ``failed``: a
    strategy that tries it spends a measurement, as it would on the device. The entries' objective is ranked
    in its direction (:func:`cache_objective`; ``objective`` overrides it); the repeated ``times`` are kept
    only where the objective is time, since they are times."""
    path = Path(path)
    raw = _read_cache_file(path)
    keys = list(dict.fromkeys(raw["tune_params_keys"]))  # a key listed twice is one parameter
    goal = cache_objective(raw, path, objective)
    rows, times = [], []
    for key, entry in raw["cache"].items():
        row, repeats = _cache_row(path, key, entry, keys, goal)
        rows.append(row)
        times.append(repeats)
    if not rows:
        raise UserError(f"{path}: the cache holds no configurations")
    frame = pd.DataFrame(rows)
    params = [k for k in keys if frame[k].nunique() > 1]
    for k in params:
        if not pd.api.types.is_integer_dtype(frame[k]):
            raise UserError(
                f"{path}: parameter {k!r} is not integer-valued; only integer parameters are supported"
            )
    first = frame.iloc[0]
    constants = {
        k: first[k].item() if isinstance(first[k], np.generic) else first[k] for k in keys if k not in params
    }
    kept = [_MEASURED_TIME] if _MEASURED_TIME in frame and frame[_MEASURED_TIME].notna().any() else []
    frame = frame[params + [TIME, STATUS, *kept]].copy()
    frame["times"] = times
    device_name = str(raw.get("device_name") or "").strip()
    name = path.name.split(".")[0]
    if not device_name:
        device_name = name
    feats = device_features(device_name) or device_features(name)
    return Dataset(
        name=name,
        params=params,
        frame=frame.reset_index(drop=True),
        device={
            "device_name": device_name,
            "features": feats,
            "kernel_name": raw.get("kernel_name", ""),
            "problem_size": raw.get("problem_size"),
            "constants": constants,  # the single-valued parameters left out of params, with their value
        },
        source=str(path),
        objective=goal,
        measures={"time": _MEASURED_TIME} if kept else {},
    )


def _read_cache_file(path: Path) -> dict[str, Any]:
    """A Kernel Tuner cache file's JSON (gzipped where its name says so), checked for the keys we read."""
    # a FIFO or a device is one line, not a hang; a file past the cap, or one that inflates past it, too
    data = read_regular_bytes(path, "Kernel Tuner cache", max_bytes=cache_json.MAX_CACHE_BYTES)
    assert data is not None
    try:
        raw = cache_json.parse(cache_json.gunzip(data, path) if path.name.endswith(".gz") else data.decode())
    except DuplicateKey as exc:
        raise UserError(f"{path}: Kernel Tuner cache: {exc}"[:300]) from None
    except (OSError, EOFError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise UserError(
            f"{path}: not a readable Kernel Tuner cache ({exc.__class__.__name__}: {exc})"
        ) from None
    if not isinstance(raw, dict) or "cache" not in raw or "tune_params_keys" not in raw:
        raise UserError(f"{path}: not a Kernel Tuner cache (expected keys 'tune_params_keys' and 'cache')")
    check_record(raw, "Kernel Tuner cache", path)
    return raw


def _cache_row(
    path: Path, key: str, entry: dict[str, Any], keys: list[str], goal: Objective
) -> tuple[dict[str, Any], np.ndarray]:
    """One cache entry as a row (each parameter one value within 64 bits; its cost under ``goal``, failed
    where that is not a number) and its repeated times (none unless the objective is time)."""
    missing = [k for k in keys if k not in entry]
    if missing:
        raise UserError(f"{path}: cache entry {key!r} lacks parameter {missing[0]!r}"[:300])
    bad = [k for k in keys if isinstance(entry[k], list | dict)]
    if bad:
        raise UserError(
            f"{path}: cache entry {key!r}: parameter {bad[0]!r} is {entry[bad[0]]!r}, not one value"[:300]
        )
    huge = [k for k in keys if type(entry[k]) is int and not -(2**63) <= entry[k] < 2**63]
    if huge:
        raise UserError(f"{path}: cache entry {key!r}: parameter {huge[0]!r} is past a 64-bit integer"[:300])
    value = entry.get(goal.name)
    cost = goal.cost(value) if cache_json.finite(value) else np.nan
    ok = bool(np.isfinite(cost))
    row = {k: entry[k] for k in keys}
    row[TIME] = cost if ok else np.nan
    row[STATUS] = "ok" if ok else "failed"
    if not goal.is_time:  # the entry's time kept beside the objective (an export writes it back)
        measured: Any = entry.get("time")  # a number, or text where it failed
        row[_MEASURED_TIME] = float(measured) if ok and cache_json.finite(measured) else np.nan
    rep = entry.get("times") if ok and goal.is_time else None
    return row, cache_json.repeats(rep, f"{path}: cache entry {key!r}: times")


_MEASURED_TIME = "measure.time"  # a Kernel Tuner cache's time where its objective is another quantity


# ------------------------------------------------------------------------------------------------ our Parquet
def _first(columns: Sequence[str], choices: Sequence[str]) -> str | None:
    return next((c for c in choices if c in columns), None)


def _from_sweep_frame(
    df: pd.DataFrame,
    name: str,
    source: str,
    declared: list[str] | None = None,
    objective: Objective = TIME_OBJECTIVE,
) -> Dataset:
    cols = list(df.columns)
    kernel_of = {c: m["kernel"] for c in cols if (m := _LAUNCH_PARAM.match(c))}  # launch column -> its kernel
    launch = list(kernel_of)
    extra = [c for c in ("streams", "fusion") if c in cols]  # parameters of no one kernel
    if declared:  # a file we wrote ourselves names its parameters in the schema metadata
        missing = [c for c in declared if c not in cols]
        if missing:
            raise UserError(f"{source}: declared parameter column {missing[0]!r} is missing")
        extra = [c for c in declared if c not in launch]
    params = launch + extra
    if not params:
        raise UserError(
            f"{source}: no launch-parameter columns ('<kernel>.blocks', '<kernel>.threads') found"
        )
    # rows that state an objective rank by its cost (pipeline.sweep.schema); their time and measures are kept
    stated = OBJECTIVE_COLUMN in cols
    total = OBJECTIVE_COLUMN if stated else _first(cols, _TOTAL_COLUMNS)
    if total is None:
        raise UserError(f"{source}: no total-time column (one of {', '.join(_TOTAL_COLUMNS)})")
    measures: dict[str, str] = {}
    if stated:
        found = [("time", c) for c in ("total_ms",) if c in cols]
        found += [(c.removeprefix("metric."), c) for c in cols if c.startswith("metric.")]
        found += [(c, c) for c in ("energy_mJ", "power_W") if c in cols]
        measures = {k: f"measure.{k}" for k, _ in found}
    kernels: dict[str, list[str]] = {}
    for c in launch:
        kernels.setdefault(kernel_of[c], []).append(c)
    kernel_times = {}
    for k in kernels:
        col = _first(cols, [p.format(k=k) for p in _KERNEL_TIME_PATTERNS])
        if col is not None:
            kernel_times[k] = col
    if extra or len(kernel_times) != len(kernels) or stated:
        # not separable: a global parameter, a kernel without its own time, or a cost that is no sum of times
        kernels, kernel_times = {}, {}
    status = df["status"].astype(str) if "status" in df else pd.Series("ok", index=df.index)
    times_col = None if stated else _first(cols, _TIMES_COLUMNS)  # repeated times are no cost's repeats
    work = df[params].copy()
    for p in params:
        if work[p].isna().any():
            raise UserError(f"{source}: column {p!r} has empty values")
        work[p] = work[p].astype(int)
    work[TIME] = pd.to_numeric(df[total], errors="coerce").where(status == "ok")
    work[STATUS] = np.where(work[TIME].notna(), "ok", np.where(status == "ok", "failed", status))
    for col in kernel_times.values():
        work[col] = pd.to_numeric(df[col], errors="coerce")
    if stated:
        for key, col in found:
            work[measures[key]] = pd.to_numeric(df[col], errors="coerce")
    if times_col:
        work["_times"] = [np.asarray(v, dtype=float) if v is not None else np.empty(0) for v in df[times_col]]
    else:
        work["_times"] = [np.empty(0)] * len(df)
    frame = _one_row_per_config(work, params, [*kernel_times.values(), *measures.values()])
    default = _default_of(df, params, status)
    device_name = str(df["device_name"].iloc[0]) if "device_name" in df else name
    feats = device_features(device_name) or device_features(name)
    return Dataset(
        name,
        params,
        frame,
        kernels,
        kernel_times,
        default,
        {"device_name": device_name, "features": feats},
        source,
        objective=objective,
        measures=measures,
    )


def _default_of(df: pd.DataFrame, params: list[str], status: pd.Series) -> dict[str, int] | None:
    """The sweep's default configuration: its ``default`` row's, else read off its per-kernel sweeps; None
    where it has neither."""
    if "sampler" in df and (df["sampler"] == "default").any():
        return {p: int(df.loc[df["sampler"] == "default", p].iloc[0]) for p in params}
    if "sampler" in df and (df["sampler"] == "per_kernel_exhaustive").any():
        # per-kernel sweeps hold every other kernel at the default, so a parameter's default is the value
        # most of those rows share; where no value holds half of them (only that kernel was swept), the
        # first working row's value stands in
        sweep = df.loc[df["sampler"] == "per_kernel_exhaustive", params]
        ok_rows = df[status == "ok"]
        first = ok_rows.iloc[0] if len(ok_rows) else df.iloc[0]
        default = {}
        for p in params:
            counts = sweep[p].value_counts()
            default[p] = int(counts.index[0]) if counts.iloc[0] >= len(sweep) / 2 else int(first[p])
        return default
    return None


def _one_row_per_config(work: pd.DataFrame, params: list[str], kernel_cols: list[str]) -> pd.DataFrame:
    """One row per distinct configuration, in order of first appearance.

    Repeated rows of one configuration (a random sample that hit a per-kernel sweep point, a rerun) pool their
    totals as the repeated times, so replay keeps their spread. Configurations recorded once (nearly all of a
    sweep) are taken over whole, vectorised: the per-group loop costs about 2 ms a group, 23 s of CPU for the
    10,840 rows of the H100 sweep, paid by every replay worker process (issue 18)."""
    work = work.reset_index(drop=True)
    repeated = work.duplicated(params, keep=False).to_numpy()
    single = work.loc[~repeated, params + [TIME, STATUS] + kernel_cols].copy()
    bad = (single[STATUS] != "ok").to_numpy()
    for col in kernel_cols:
        single.loc[bad, col] = np.nan
    single["times"] = [
        t if ok else np.empty(0) for t, ok in zip(work.loc[~repeated, "_times"], ~bad, strict=True)
    ]
    single["_first"] = np.flatnonzero(~repeated)
    groups = []
    for key, g in work[repeated].groupby(params, sort=False):
        okg = g[g[STATUS] == "ok"]
        row = dict(zip(params, key if isinstance(key, tuple) else (key,), strict=True))
        if len(okg):
            reps = np.concatenate(list(okg["_times"]))
            if not len(reps) and len(okg) > 1:
                reps = okg[TIME].to_numpy()
            row[TIME] = float(okg[TIME].median())
            row[STATUS] = "ok"
            for col in kernel_cols:
                row[col] = float(okg[col].median())
            row["times"] = np.asarray(reps, dtype=float)
        else:
            row[TIME] = np.nan
            row[STATUS] = str(g[STATUS].iloc[0])
            for col in kernel_cols:
                row[col] = np.nan
            row["times"] = np.empty(0)
        row["_first"] = int(g.index[0])
        groups.append(row)
    columns = params + [TIME, STATUS] + kernel_cols + ["times", "_first"]
    parts = [single] + ([pd.DataFrame(groups, columns=columns)] if groups else [])
    frame = pd.concat(parts, ignore_index=True)
    frame = frame.sort_values("_first", kind="stable").drop(columns="_first").reset_index(drop=True)
    for p in params:
        frame[p] = frame[p].astype(int)
    return frame


def load_parquet(path: str | Path) -> list[Dataset]:
    """Read our sweep Parquet (a file or a directory dataset) as one Dataset per GPU class."""
    path = Path(path)
    # pyarrow opens the files itself: each is checked to be a regular file first (a FIFO would never answer)
    for file in sorted(path.rglob("*")) if path.is_dir() else [path] if path.exists() else []:
        if not file.is_dir():
            check_regular(file, "Parquet")
    try:
        table = pq.read_table(path)
        df = table.to_pandas()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file or directory") from None
    except Exception as exc:  # pyarrow raises several unrelated types for a corrupt file
        raise UserError(f"{path}: not a readable Parquet dataset ({exc.__class__.__name__}: {exc})") from None
    if df.empty:
        raise UserError(f"{path}: the dataset holds no rows")
    meta = table.schema.metadata or {}
    declared = json.loads(meta[_PARAMS_META]) if _PARAMS_META in meta else _plan_params(path)
    rules = json.loads(meta[_INACTIVE_META]) if _INACTIVE_META in meta else _plan_inactive(path)
    if OBJECTIVE_META in meta:  # rows that state their objective (a kernel spec's)
        goal = objective_of(meta)
    else:
        goal = objective_of({"objective": _plan_field(path, "objective")})
    cls = _first(list(df.columns), _CLASS_COLUMNS)
    if cls is None:
        found = [_from_sweep_frame(df, path.stem, str(path), declared, goal)]
    else:
        found = [
            _from_sweep_frame(g.reset_index(drop=True), str(key), f"{path}[{cls}={key}]", declared, goal)
            for key, g in df.groupby(df[cls].astype(str), sort=True)
        ]
    for dataset in found:
        dataset.inactive = [r for r in rules if r[0] in dataset.params]
    return found


def _plan_field(path: Path, field: str) -> Any:
    """A field of the plan of the sweep a ``<sweep>/merged`` folder belongs to (``<sweep>/plan/<class>.json``,
    written by the sweep; the first plan that has it), or None for any other file."""
    for plan in sorted((path.parent / "plan").glob("*.json")) if path.is_dir() else []:
        try:
            value = read_json(plan, "plan").get(field)
        except (UserError, AttributeError):
            continue
        if value:
            return value
    return None


def _plan_inactive(path: Path) -> list[list[Any]]:
    """The unused-parameter rules of the sweep a ``<sweep>/merged`` folder belongs to: its plan names them;
    none for any other file."""
    rules = _plan_field(path, "inactive") or []
    return [[str(w), [int(v) for v in vals], [str(p) for p in params]] for w, vals, params in rules]


def _plan_params(path: Path) -> list[str] | None:
    """The parameters of the sweep a ``<sweep>/merged`` folder belongs to, as its plan lists them: the column
    names alone cannot tell a parameter from a measurement (``tile.arith`` was read as neither until
    2026-11-25, so a replay merged rows that differ only in it)."""
    params = _plan_field(path, "params")
    return [str(p) for p in params] if params else None


# -------------------------------------------------------------------------------------------- entry points
def _is_cache(p: Path) -> bool:
    return p.name.endswith((".json", ".json.gz"))


# A recorded time above this (ms: 11 days a launch) is not a measurement; as the failures' stand-in it would
# overflow the ratios a strategy is scored by (1e308 / the optimum) into infinities.
MAX_TIME_MS = 1e9


def usable(dataset: Dataset) -> Dataset:
    """A dataset a strategy can search: a parameter that takes two values or more, and a configuration that
    ran with a time in (0, ``MAX_TIME_MS``]; a time outside it counts as a failed configuration. Else one
    line naming the source (a cache of one entry, or whose every time is NaN, gave numpy's tracebacks)."""
    frame = dataset.frame
    bad = (frame[STATUS] == "ok") & ~((frame[TIME] > 0) & (frame[TIME] <= MAX_TIME_MS))
    if bad.any():
        frame.loc[bad, [TIME, STATUS]] = [np.nan, "failed"]
    if not dataset.params:
        raise UserError(f"{dataset.source}: no parameter takes two values or more: nothing to tune")
    if not (frame[STATUS] == "ok").any():
        raise UserError(
            f"{dataset.source}: no configuration ran (every time is missing, not a number, or outside "
            f"(0, {MAX_TIME_MS:g}] ms)"
        )
    return dataset


def align_params(datasets: Sequence[Dataset]) -> list[Dataset]:
    """Datasets of one space over the same parameters: a parameter some of them lack is dropped from the
    others where it takes one value in all of them (a Kernel Tuner cache leaves out a parameter of one
    value, such as the convolution's ``filter_height``, which a sweep of the ``kernel`` workload records).
    A parameter that varies in one dataset and is missing from another means two different spaces: one
    line naming both."""
    if not datasets:
        return []
    shared = set.intersection(*(set(d.params) for d in datasets))
    extra = {p for d in datasets for p in d.params} - shared
    for p in sorted(extra):
        values = {v for d in datasets if p in d.params for v in d.values(p)}
        if len(values) > 1:
            has = next(d for d in datasets if p in d.params)
            lacks = next(d for d in datasets if p not in d.params)
            raise UserError(
                f"{has.source or has.name}: parameter {p!r} takes {len(values)} values there and is missing "
                f"from {lacks.source or lacks.name}: data of two different spaces"
            )
    out = []
    for d in datasets:
        drop = [p for p in d.params if p in extra]
        if drop:
            d = replace(
                d,
                params=[p for p in d.params if p not in drop],
                frame=d.frame.drop(columns=drop),
                default={k: v for k, v in d.default.items() if k not in drop} if d.default else d.default,
                kernels={k: [p for p in v if p not in drop] for k, v in d.kernels.items()},
            )
        out.append(d)
    return out


def load_datasets(path: str | Path, objective: Objective | None = None) -> list[Dataset]:
    """Every dataset under ``path``: a cache file, a Parquet file, a folder of either (one per device), or a
    sweep folder (its ``merged/`` rows; the folder's own JSON files are records, not caches); each checked
    by ``usable``. ``objective`` (``--objective NAME:max|min``) gives a cache's objective its direction; a
    Parquet dataset states its own (time where it states none), and another one named is refused."""
    datasets = [usable(d) for d in _load_datasets(path, objective)]
    for d in datasets:
        if objective is not None and d.objective != objective:
            raise UserError(
                f"{d.source}: ranked by {d.objective.describe()} when measured; --objective "
                f"{objective.name}:{'max' if objective.maximize else 'min'} cannot rank it otherwise "
                "(it gives a Kernel Tuner cache's objective its direction)"[:400]
            )
    return datasets


def _load_datasets(path: str | Path, objective: Objective | None = None) -> list[Dataset]:
    path = Path(path)
    try:  # missing, a symlink loop, a FIFO or a device: one line that says which
        check_input(path, "file or directory (a dataset)")
    except FileRefused as exc:
        raise UserError(str(exc)) from None
    if (path / "sweep.json").is_file():
        if not (path / "merged").is_dir():
            raise UserError(
                f"{path}: a sweep folder without merged data; run `launchtune merge {path}` first"
            )
        return load_parquet(path / "merged")
    if path.is_file():
        return [load_kernel_tuner_cache(path, objective)] if _is_cache(path) else load_parquet(path)
    caches = sorted(p for p in path.iterdir() if p.is_file() and _is_cache(p))
    if caches:
        return [load_kernel_tuner_cache(p, objective) for p in caches]
    if any(path.rglob("*.parquet")):
        return load_parquet(path)
    raise UserError(f"{path}: holds neither Kernel Tuner caches (*.json[.gz]) nor Parquet files")


def write_parquet(dataset: Dataset, path: str | Path) -> Path:
    """Save a dataset (an imported cache, say) as Parquet our loader reads back; written to a temporary name
    and renamed so a crash never leaves half a file; never inside a sweep folder (its rows are its own)."""
    from .ownership import refuse_inside_project_folder

    path = Path(path)
    refuse_inside_project_folder(path, "dataset")
    frame = dataset.frame.copy()
    frame["total_times"] = [list(map(float, t)) for t in frame.pop("times")]
    stated = not dataset.objective.is_time
    frame = frame.rename(columns={TIME: OBJECTIVE_COLUMN if stated else "total_ms"})
    renames = {c: ("total_ms" if k == "time" else f"metric.{k}") for k, c in dataset.measures.items()}
    renames.update({dataset.measures[k]: k for k in ("energy_mJ", "power_W") if k in dataset.measures})
    frame = frame.rename(columns=renames)
    frame["gpu_class"] = dataset.name
    frame["device_name"] = dataset.device.get("device_name", dataset.name)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[_PARAMS_META] = json.dumps(dataset.params).encode()
    if stated:
        meta[OBJECTIVE_META] = json.dumps(dataset.objective.as_dict()).encode()
    if dataset.inactive:
        meta[_INACTIVE_META] = json.dumps(dataset.inactive).encode()
    table = table.replace_schema_metadata(meta)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return path
