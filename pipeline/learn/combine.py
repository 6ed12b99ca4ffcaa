"""Gather sweep folders of several GPU classes, each measured on its own machine, into one folder, then
train (per class and combined) and report there without measuring anything.

Which sources go together: the same workload, case, size, workload options and check setting, and the same
launch space (parameters, their values, kernels). The rest of the planning key may differ, because it is each
class's measuring budget or what its device needs: ``backend`` (the CPU class runs numpy, the GPUs CuPy),
``samples``, ``samplers``, ``repeats``, ``batch_size`` and the sampling ``seed``. Size must agree: rows of
another grid size are another problem (a launch's effect does not scale with the cell count), and with one
class per size the size would be indistinguishable from the device. Two sources holding the same class are
refused: which one's rows would count?

The output folder must be new or empty, or one combine made (:mod:`pipeline.sweep.ownership`); a folder
holding anything else is refused, never cleared. The folder gets ``merged/`` only (no ``shards/``: the
sources keep theirs; merged holds the same rows),
``plan/<class>.json`` without the sampled configurations (each row of merged carries its own), the sources'
``validation.json`` entries (each source's re-measurement of its own model's pick), and ``sweep.json`` whose
``combined`` block records every source (path, classes, planning key, data hash, device facts). The command
is deterministic: the same sources give the same merged data, split and models.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from pipeline.errors import UserError
from pipeline.learn.report import build_report
from pipeline.learn.train import train_sweep
from pipeline.paths import check_slug
from pipeline.sweep.folder import PLAN_FACTS, SweepFolder, data_hash
from pipeline.sweep.ownership import claim
from pipeline.sweep.schema import shard_schema
from pipeline.sweep.shards import load_merged, write_merged
from pipeline.sweep.spec import SweepSpec

logger = logging.getLogger(__name__)

Log = Callable[[str], None]

MUST_AGREE = ("workload", "case", "size", "options", "check")
MAY_DIFFER = ("backend", "samples", "samplers", "repeats", "batch_size", "seed")
PLAN_KEYS = ("params", "values", "kernels")


@dataclass
class Source:
    path: Path  # as given on the command line (recorded so)
    spec: SweepSpec
    meta: dict[str, Any]  # sweep.json
    frame: pd.DataFrame
    classes: list[str]
    plans: dict[str, dict[str, Any]]
    validation: dict[str, Any] | None


def read_source(path: Path) -> Source:
    if not path.is_dir():
        raise UserError(f"{path}: no such sweep folder")
    folder = SweepFolder(path)
    spec, _ = folder.read_spec()
    folder.planning_key()  # a user error where there is none
    meta = folder.read_meta()
    frame = load_merged(path)
    classes = sorted(frame["gpu_class"].unique())
    plans = {c: folder.read_plan(c) for c in classes}
    validation = folder.read_validation()
    return Source(path, spec, meta, frame, classes, {c: p for c, p in plans.items() if p}, validation)


def check_sources(sources: Sequence[Source]) -> None:
    """Refuse sources that do not belong together (the policy in the module docstring)."""
    if len(sources) < 2:
        raise UserError("combine: name at least two sweep folders to combine")
    seen: dict[str, Path] = {}
    for s in sources:
        for c in s.classes:
            if c in seen:
                raise UserError(
                    f"{s.path}: GPU class {c!r} is also in {seen[c]}; each class must come from one source "
                    "(drop one, or re-measure the class into one folder)"
                )
            seen[c] = s.path
    first = sources[0]
    for s in sources[1:]:
        for k in MUST_AGREE:
            a, b = first.meta["planning_key"].get(k), s.meta["planning_key"].get(k)
            if a != b:
                raise UserError(
                    f"{s.path}: sweep.json planning_key.{k} is {b!r}, but {a!r} in {first.path}; only "
                    f"{', '.join(MAY_DIFFER)} may differ between combined sweeps"
                )
        for k in PLAN_KEYS:
            if first.meta["plan"].get(k) != s.meta["plan"].get(k):
                raise UserError(
                    f"{s.path}: sweep.json plan.{k} differs from {first.path} (another launch space); "
                    "combined sweeps must share parameters, their values and kernels"
                )


def _fill_measured_bandwidth(s: Source, log: Log) -> tuple[pd.DataFrame, dict[str, str]]:
    """Rows older than the ``measured_bandwidth_gbs`` column get it from their plan's device facts where the
    plan has them; otherwise they stay null and training leaves the feature out (and says so)."""
    frame, notes = s.frame.copy(), {}
    if "measured_bandwidth_gbs" not in frame:
        frame["measured_bandwidth_gbs"] = float("nan")
    for c in s.classes:
        rows = frame["gpu_class"] == c
        if not frame.loc[rows, "measured_bandwidth_gbs"].isna().any():
            continue
        value = (s.plans.get(c) or {}).get("device", {}).get("measured_bandwidth_gbs")
        if value is not None:
            frame.loc[rows & frame["measured_bandwidth_gbs"].isna(), "measured_bandwidth_gbs"] = float(value)
            notes[c] = f"measured_bandwidth_gbs filled from {s.path}/plan/{c}.json ({value} GB/s)"
        else:
            notes[c] = f"measured_bandwidth_gbs missing in {s.path} (measured before the column existed)"
        log(f"combine: {c}: {notes[c]}")
    return frame, notes


def _table(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    frame = frame.copy()
    for name in schema.names:
        if name not in frame:
            frame[name] = None  # columns newer than the source's data: null
    table = pa.Table.from_pandas(frame[schema.names], preserve_index=False)
    return table.cast(schema)


def _device_of(s: Source, cls: str) -> dict[str, Any]:
    plan = s.plans.get(cls)
    if plan and plan.get("device"):
        return plan["device"]
    row = s.frame[s.frame["gpu_class"] == cls].iloc[0]
    keys = (
        "device_name",
        "device_class",
        "backend",
        "sm_count",
        "peak_fp64_gflops",
        "spec_bandwidth_gbs",
        "spec_memory_gb",
        "measured_bandwidth_gbs",
    )
    facts = {}
    for k in keys:
        if k in row:
            v = row[k]
            facts[k] = None if pd.isna(v) else (v.item() if hasattr(v, "item") else v)
    return facts


def _prepare_out(out: Path, sources: Sequence[Source]) -> None:
    resolved = out.resolve()
    for s in sources:
        src = s.path.resolve()
        if resolved == src or src in resolved.parents or resolved in src.parents:
            raise UserError(
                f"{out}: the output folder must lie outside every source and hold none ({s.path})"
            )
    folder = SweepFolder(out)
    meta = folder.read_meta() if out.is_dir() else None
    if meta is not None and "combined" not in meta:
        raise UserError(
            f"{out}: holds a measured sweep (sweep.json without a combined block); pick another folder"
        )
    claim(out, "combined", "OUT")  # a new or empty folder, or one combine made; never a user's files
    folder.clear("combined")


def combine(out: Path, paths: Sequence[Path], log: Log = logger.info, train: bool = True) -> dict[str, Any]:
    """Everything ``python -m pipeline combine OUT SRC...`` does; returns the ``combined`` block."""
    if len({p.resolve() for p in paths}) < len(paths):
        raise UserError("combine: a source folder is named twice")
    sources = [read_source(Path(p)) for p in paths]
    check_sources(sources)
    _prepare_out(out, sources)
    folder = SweepFolder(out)
    base = sources[0]
    plan = {k: v for k, v in base.meta["plan"].items() if k in PLAN_FACTS}
    schema = shard_schema(plan["params"], plan["kernels"])
    classes = sorted(c for s in sources for c in s.classes)
    notes: list[str] = []
    tables, records, validation = [], [], {}
    for s in sources:
        frame, filled = _fill_measured_bandwidth(s, log)
        notes += [f"{c}: {n}" for c, n in filled.items()]
        tables.append(_table(frame, schema))
        counts = s.frame["status"].value_counts()
        records.append(
            {
                "path": str(s.path),
                "classes": s.classes,
                "sweep_id": s.spec.name,
                "planning_key": s.meta["planning_key"],
                "spec_source": s.spec.source,
                "rows": int(len(s.frame)),
                "ok": int(counts.get("ok", 0)),
                "data_hash": data_hash(s.frame),
                "devices": {c: _device_of(s, c) for c in s.classes},
                "validation": sorted((s.validation or {}).keys()),
                "timing": SweepFolder(s.path).read_timing(),
            }
        )
        for c in s.classes:
            if c in (s.validation or {}):
                validation[c] = {**s.validation[c], "source": str(s.path)}
            else:
                notes.append(f"{c}: no re-measurement in {s.path}/validation.json")
                log(f"combine: {c}: {s.path} has no validation.json entry; its report rows stay empty")
            if c in s.plans:
                slim = {k: v for k, v in s.plans[c].items() if k != "configs"}
                slim.update(n_configs=len(s.plans[c].get("configs", [])), source=str(s.path))
                folder.write_plan(c, slim)
        for k in ("test_fraction", "train"):
            if getattr(s.spec, k) != getattr(base.spec, k):
                notes.append(f"{s.path}: spec {k} differs from {base.path}; {base.path}'s is used")
    merged = write_merged(out, pa.concat_tables(tables))
    backends = sorted({s.meta["planning_key"]["backend"] for s in sources})
    name = out.resolve().name
    try:
        name = check_slug(name, "OUT")
    except UserError:
        name = "combined"
    spec = replace(
        base.spec,
        name=name,
        backend=backends[0] if len(backends) == 1 else "mixed",
        gpu_classes=tuple(classes),
        description="combined: " + "; ".join(f"{', '.join(r['classes'])} from {r['path']}" for r in records),
        output=None,
        source="python -m pipeline combine",
    )
    block = {
        "command": " ".join(["python -m pipeline combine", str(out), *map(str, paths)]),
        "policy": {"must_agree": list(MUST_AGREE) + list(PLAN_KEYS), "may_differ": list(MAY_DIFFER)},
        "sources": records,
        "notes": notes,
    }
    folder.write_meta(
        {"spec": spec.to_dict(), "planning_key": spec.planning_key(), "plan": plan, "combined": block}
    )
    folder.write_validation(validation)
    log(f"combined {merged.num_rows} rows of {', '.join(classes)} from {len(sources)} sweeps into {out}")
    if train:
        train_sweep(out, log)
        build_report(out, log)
        log(f"report: {folder.report_md}")
    return block
