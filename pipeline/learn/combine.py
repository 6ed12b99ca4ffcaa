"""Gather sweep folders of several GPU classes, each measured on its own machine, into one folder, then
train (per class and combined) and report there without measuring anything.

Which sources go together: the same workload, case, size, workload options and check setting, and the same
launch space (parameters, their values, kernels). The rest of the planning key may differ, because it is each
class's measuring budget or what its device needs: ``backend`` (the CPU class runs numpy, the GPUs CuPy),
``samples``, ``samplers``, ``repeats``, ``batch_size`` and the sampling ``seed``. Size must agree: rows of
another grid size are another problem (a launch's effect does not scale with the cell count), and with one
class per size the size would be indistinguishable from the device. Two sources holding the same class are
refused: which one's rows would count?

The output folder must be new or empty, or one combine made (:mod:`pipeline.store.ownership`); a folder
holding anything else is refused, never cleared. The folder gets ``merged/`` only (no ``shards/``: the
sources keep theirs; merged holds the same rows),
``plan/<class>.json`` without the sampled configurations (each row of merged carries its own), the sources'
``validation.json`` entries (each source's re-measurement of its own model's pick), and ``sweep.json`` whose
``combined`` block records every source (path, classes, planning key, data hash, device facts). The command
is deterministic: the same sources give the same merged data, split and models.

A source may also be a Kernel Tuner cache (a ``.json``/``.json.gz`` file, or a folder of them): each cache is
one GPU class with its data-sheet facts from the GPU registry (:mod:`pipeline.store.caches`). A cache has no
planning key, so it must share the launch space's parameters instead: every parameter of the sweeps (or,
with caches alone, of the first cache) recorded, and any other parameter single-valued (a constant of the
problem, such as the hub's ``filter_height``, left out). Caches must agree among themselves on the kernel
name and the problem size; where a sweep's size or case differs from theirs the ``combined`` block notes it.
With caches alone the folder's spec is made up: workload ``kernel_tuner_cache``, the caches' kernel name as
the case, their problem size, the default training settings.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from launchtune.kernels.files import FileRefused, check_input

from ..errors import UserError
from ..paths import check_slug
from ..store.caches import SAMPLER, CacheClass, is_cache_path, read_caches
from ..store.folder import (
    Plan,
    PlanFacts,
    SweepFolder,
    SweepMeta,
    Validation,
    data_hash,
    plan_facts,
)
from ..store.ownership import claim
from ..store.schema import objective_of, plan_schema
from ..store.shards import load_merged, write_merged
from ..store.spec import SweepSpec, TrainSpec
from .train import train_sweep

logger = logging.getLogger(__name__)

Log = Callable[[str], None]

MUST_AGREE = ("workload", "case", "size", "options", "check")
MAY_DIFFER = ("backend", "samples", "samplers", "repeats", "batch_size", "seed")
PLAN_KEYS = ("params", "values", "kernels")


@dataclass
class Source:
    path: Path  # as given on the command line (recorded so)
    spec: SweepSpec
    meta: SweepMeta  # sweep.json
    frame: pd.DataFrame
    classes: list[str]
    plans: dict[str, Plan]
    validation: Validation | None


def read_source(path: Path) -> Source:
    try:  # missing, a loop, a FIFO, a file: one line that says which
        check_input(path, "sweep folder", file_ok=False)
    except FileRefused as exc:
        raise UserError(str(exc)) from None
    folder = SweepFolder(path)
    spec, _ = folder.read_spec()
    folder.planning_key()  # a user error where there is none
    meta = folder.read_meta()
    if meta is None:  # (read_spec said so already)
        raise UserError(f"{path}: not a sweep folder (no sweep.json)")
    frame = load_merged(path)
    classes = sorted(frame["gpu_class"].unique())
    plans = {c: folder.read_plan(c) for c in classes}
    validation = folder.read_validation()
    return Source(path, spec, meta, frame, classes, {c: p for c, p in plans.items() if p}, validation)


def check_sources(sources: Sequence[Source], caches: Sequence[CacheClass] = ()) -> None:
    """Refuse sources that do not belong together (the policy in the module docstring)."""
    if len(sources) + len(caches) < 2:
        raise UserError("combine: name at least two sweep folders or Kernel Tuner caches to combine")
    seen: dict[str, Path] = {}
    for path, classes in [(s.path, s.classes) for s in sources] + [(c.path, [c.gpu_class]) for c in caches]:
        for c in classes:
            if c in seen:
                raise UserError(
                    f"{path}: GPU class {c!r} is also in {seen[c]}; each class must come from one source "
                    "(drop one, or re-measure the class into one folder)"
                )
            seen[c] = path
    # what each class's rows are the cost of: a sweep's plan states it (time where not), a cache its own
    goals = [(f"{s.path} ({c})", objective_of(s.plans.get(c))) for s in sources for c in s.classes]
    goals += [(str(c.path), c.objective) for c in caches]
    other = next(((w, g) for w, g in goals if g != goals[0][1]), None)
    if other is not None:
        raise UserError(
            f"{other[0]}: ranked by {other[1].describe()}, but {goals[0][0]} by {goals[0][1].describe()}; "
            "combine sources of one objective (a Kernel Tuner cache's: --objective where it has none)"[:400]
        )
    if not sources:
        return
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


def cache_params(sources: Sequence[Source], caches: Sequence[CacheClass]) -> list[str]:
    """The launch space's parameters (the sweeps', else those that vary in some cache, in the first cache's
    order), after refusing a cache that lacks one or varies another, and caches of different problems."""
    fixed: dict[str, Any] = {}  # the sweeps' single-valued parameters: constants of their problem
    if sources:
        params = list(sources[0].meta["plan"]["params"])
        where = f"the sweep {sources[0].path}"
        values = sources[0].meta["plan"].get("values") or {}
        fixed = {p: v[0] for p, v in values.items() if isinstance(v, list) and len(v) == 1}
    else:
        first = caches[0]
        params = [p for p in first.params if any(len(c.params.get(p, [])) > 1 for c in caches)]
        where = f"{first.path}"
    for c in caches:
        missing = [p for p in params if p not in c.params]
        if missing:
            raise UserError(f"{c.path}: no parameter {missing[0]!r}, which {where} tunes")
        other = [p for p in params if p in fixed and c.params[p] != [fixed[p]]]
        if other:
            raise UserError(
                f"{c.path}: parameter {other[0]!r} is {c.params[other[0]]} here but {fixed[other[0]]} in "
                f"{where}: another problem"
            )
        extra = [p for p, values in c.params.items() if p not in params and len(values) > 1]
        if extra:
            raise UserError(
                f"{c.path}: parameter {extra[0]!r} takes several values but {where} does not tune it"
            )
    for c in caches[1:]:
        for key in ("kernel_name", "problem_size"):
            a, b = getattr(caches[0], key), getattr(c, key)
            if a != b:
                raise UserError(f"{c.path}: {key} is {b!r}, but {a!r} in {caches[0].path}: another problem")
    return params


def _cache_notes(sources: Sequence[Source], caches: Sequence[CacheClass]) -> list[str]:
    """Where the sweeps' problem may differ from the caches' (a sweep's size and case are its workload's
    words, which a cache need not share): said, not refused."""
    if not sources or not caches:
        return []
    spec, c = sources[0].spec, caches[0]
    notes = []
    if spec.size != c.problem_size:
        notes.append(
            f"size: {spec.size!r} in {sources[0].path}, problem_size {c.problem_size!r} in the caches"
        )
    kernels = sources[0].meta["plan"].get("kernels") or []
    if c.kernel_name and c.kernel_name not in kernels:
        notes.append(
            f"kernel: the caches record {c.kernel_name!r}; {sources[0].path} times "
            + (", ".join(kernels) or "none")
        )
    return notes


# How a folder of caches alone trains (a sweep brings its own spec's): the sweep spec's defaults.
CACHE_TRAIN = TrainSpec()


def _cache_spec(caches: Sequence[CacheClass], name: str) -> SweepSpec:
    """The made-up spec of a folder of caches alone (the module docstring)."""
    c = caches[0]
    return SweepSpec(
        name=name,
        workload=SAMPLER,
        case=c.kernel_name or "kernel",
        size=c.problem_size or "1",
        backend=SAMPLER,
        samples=max(len(x.frame) for x in caches),
        samplers=(SAMPLER,),
        train=CACHE_TRAIN,
        source="launchtune combine",
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
        plan = s.plans.get(c)
        value = (plan.get("device") or {}).get("measured_bandwidth_gbs") if plan else None
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


def _prepare_out(out: Path, paths: Sequence[Path]) -> None:
    resolved = out.resolve()
    for path in paths:
        src = path.resolve()
        if resolved == src or src in resolved.parents or resolved in src.parents:
            raise UserError(f"{out}: the output folder must lie outside every source and hold none ({path})")
    folder = SweepFolder(out)
    meta = folder.read_meta() if out.is_dir() else None
    if meta is not None and "combined" not in meta:
        raise UserError(
            f"{out}: holds a measured sweep (sweep.json without a combined block); pick another folder"
        )
    claim(out, "combined", "OUT")  # a new or empty folder, or one combine made; never a user's files
    folder.clear("combined")


def _merged_frame(table: pa.Table) -> pd.DataFrame:
    """The merged rows as ``load_merged`` reads them back from disk (columns in the order of the Parquet
    dataset, the class last; sorted by class and sample), so training and the report get them without reading
    ``merged/`` again, and ``metrics.json``'s data hash is the one a later ``train`` computes."""
    classes = table.column("gpu_class")
    frame = table.drop_columns(["gpu_class"]).append_column("gpu_class", classes).to_pandas()
    frame["gpu_class"] = frame["gpu_class"].astype(str)
    return frame.sort_values(["gpu_class", "sample_id"]).reset_index(drop=True)


def _cache_tables(
    caches: Sequence[CacheClass], schema: pa.Schema, folder: SweepFolder, log: Log
) -> tuple[list[pa.Table], list[dict[str, Any]]]:
    """Each Kernel Tuner cache as one GPU class: its rows in the merged schema, its source record, its plan
    written into the folder."""
    tables: list[pa.Table] = []
    records: list[dict[str, Any]] = []
    for c in caches:
        table = _table(c.frame, schema)
        tables.append(table)
        counts = c.frame["status"].value_counts()
        plan_c = c.plan()
        records.append(
            {
                "path": str(c.path),
                "classes": [c.gpu_class],
                "kind": SAMPLER,
                "kernel_name": c.kernel_name,
                "problem_size": c.problem_size,
                "rows": int(len(c.frame)),
                "ok": int(counts.get("ok", 0)),
                "data_hash": data_hash(table.to_pandas()),
                "devices": {c.gpu_class: plan_c["device"]},
                "validation": [],
            }
        )
        folder.write_plan(c.gpu_class, plan_c)
        log(f"combine: {c.gpu_class}: {len(c.frame)} configurations of {c.path} (a Kernel Tuner cache)")
    return tables, records


def combine(
    out: Path,
    paths: Sequence[Path],
    log: Log = logger.info,
    train: bool = True,
    report: Callable[..., Any] | None = None,
) -> dict[str, Any]:
    """Everything ``launchtune combine OUT SRC...`` does; returns the ``combined`` block. ``report`` (the
    command passes ``results.report.build_report``) is called after training as ``report(out, log, frame=,
    models=)``: reports sit above the learning layer, so this one is handed in."""
    paths = [Path(p) for p in paths]
    sources, caches = _read_inputs(paths)
    check_sources(sources, caches)
    params = cache_params(sources, caches) if caches else list(sources[0].meta["plan"]["params"])
    _prepare_out(out, paths)
    folder = SweepFolder(out)
    name = _folder_name(out)
    base_spec, plan = _launch_space(sources, caches, params, name)
    schema = plan_schema(plan, search=False)
    tables, records, validation, notes = _source_tables(sources, base_spec, schema, folder, log)
    cache_tables, cache_records = _cache_tables(caches, schema, folder, log)
    tables += cache_tables
    records += cache_records
    merged = write_merged(out, pa.concat_tables(tables))
    classes = sorted([c for s in sources for c in s.classes] + [c.gpu_class for c in caches])
    spec = _combined_spec(base_spec, name, sources, caches, classes, records)
    block = {
        "command": " ".join(["launchtune combine", str(out), *map(str, paths)]),
        "policy": {"must_agree": list(MUST_AGREE) + list(PLAN_KEYS), "may_differ": list(MAY_DIFFER)},
        "sources": records,
        "notes": _cache_notes(sources, caches) + notes,
    }
    folder.write_meta(
        {"spec": spec.to_dict(), "planning_key": spec.planning_key(), "plan": plan, "combined": block}
    )
    folder.write_validation(validation)
    log(f"combined {merged.num_rows} rows of {', '.join(classes)} from {len(paths)} sources into {out}")
    if train:
        frame = _merged_frame(merged)  # read once, handed down: training and the report read no merged/
        trained = train_sweep(out, log, merged=frame)
        if report is not None:
            report(out, log, frame=frame, models=trained["models"])
            log(f"report: {folder.report_md}")
    return block


def _read_inputs(paths: Sequence[Path]) -> tuple[list[Source], list[CacheClass]]:
    """Each path read as a sweep folder or as Kernel Tuner caches, after refusing what is no input (a symlink
    loop, a FIFO, a device: one line naming it) and a path named twice."""
    for path in paths:
        try:
            check_input(path, "sweep folder")  # (or a Kernel Tuner cache: a file is fine here)
        except FileRefused as exc:
            raise UserError(str(exc)) from None
    if len({p.resolve() for p in paths}) < len(paths):
        raise UserError("combine: a source folder is named twice")
    sources: list[Source] = []
    caches: list[CacheClass] = []
    for path in paths:
        if is_cache_path(path):
            caches += read_caches(path)
        else:
            sources.append(read_source(path))
    return sources, caches


def _folder_name(out: Path) -> str:
    """The combined folder's sweep name: its own name where that is a valid one, else ``combined``."""
    try:
        return check_slug(out.resolve().name, "OUT")
    except UserError:
        return "combined"


def _launch_space(
    sources: Sequence[Source], caches: Sequence[CacheClass], params: list[str], name: str
) -> tuple[SweepSpec, PlanFacts]:
    """The spec the folder starts from (the first sweep's, else one made up for caches alone) and its plan
    facts: the first sweep's, each parameter's values widened to those any cache recorded."""
    if sources:
        base_spec = sources[0].spec
        plan = plan_facts(sources[0].meta["plan"])
    else:
        base_spec = _cache_spec(caches, name)
        plan = PlanFacts(params=params, values={}, default=None, kernels=[], inactive=[])
    if caches:  # the values any source recorded
        values = {p: set((plan.get("values") or {}).get(p, [])) for p in params}
        for cache in caches:
            for p in params:
                values[p].update(cache.params[p])
        plan["values"] = {p: sorted(int(v) for v in values[p]) for p in params}
    return base_spec, plan


def _source_tables(
    sources: Sequence[Source], base_spec: SweepSpec, schema: pa.Schema, folder: SweepFolder, log: Log
) -> tuple[list[pa.Table], list[dict[str, Any]], Validation, list[str]]:
    """Each sweep folder's rows in the merged schema, its source record, its classes' re-measurements (each
    marked with its source) and plans written into the folder (slimmed to their facts), and notes on what
    it lacked or where its spec differs from the one used."""
    tables: list[pa.Table] = []
    records: list[dict[str, Any]] = []
    validation: Validation = {}
    notes: list[str] = []
    for s in sources:
        frame, filled = _fill_measured_bandwidth(s, log)
        notes += [f"{c}: {n}" for c, n in filled.items()]
        tables.append(_table(frame, schema))
        counts = s.frame["status"].value_counts()
        found = s.validation or {}
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
                "validation": sorted(found.keys()),
                "timing": SweepFolder(s.path).read_timing(),
            }
        )
        for c in s.classes:
            if c in found:
                validation[c] = {**found[c], "source": str(s.path)}
            else:
                notes.append(f"{c}: no re-measurement in {s.path}/validation.json")
                log(f"combine: {c}: {s.path} has no validation.json entry; its report rows stay empty")
            if c in s.plans:
                slim = s.plans[c].copy()
                slim["n_configs"] = len(slim.pop("configs", []))
                slim["source"] = str(s.path)
                folder.write_plan(c, slim)
        for k in ("test_fraction", "train"):
            if getattr(s.spec, k) != getattr(base_spec, k):
                notes.append(
                    f"{s.path}: spec {k} differs from {sources[0].path}; {sources[0].path}'s is used"
                )
    return tables, records, validation, notes


def _combined_spec(
    base_spec: SweepSpec,
    name: str,
    sources: Sequence[Source],
    caches: Sequence[CacheClass],
    classes: list[str],
    records: Sequence[dict[str, Any]],
) -> SweepSpec:
    """The folder's spec: ``base_spec`` under the folder's name, over every class, its backend the sources'
    one (``mixed`` where they differ), described by where each class came from."""
    backends = sorted({s.meta["planning_key"]["backend"] for s in sources} | ({SAMPLER} if caches else set()))
    return replace(
        base_spec,
        name=name,
        backend=backends[0] if len(backends) == 1 else "mixed",
        gpu_classes=tuple(classes),
        description="combined: " + "; ".join(f"{', '.join(r['classes'])} from {r['path']}" for r in records),
        output=None,
        source="launchtune combine",
    )
