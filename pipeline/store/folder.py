"""The sweep folder: its layout, its records and every read and write of its files.

No other module builds a path inside a sweep folder or parses one of its JSON files; they ask a
:class:`SweepFolder`. Layout of ``DIR``::

    sweep.json                             SweepMeta: spec, planning key, plan facts (+ ``combined`` block)
    plan/<class>.json                      Plan: a class's facts, its device and how many configurations
    plan/<class>.configs.parquet           its sampled configurations, one row per sample id (``sampler``
                                           and one column per parameter; older folders keep them in the JSON)
    shards/gpu_class=<C>/shard-<b>.parquet one file per (class, batch), written atomically by a worker
    merged/gpu_class=<C>/part-0.parquet    every shard's rows, partitioned by class (hive style)
    models/<group>/<model>.skops           fitted surrogates; models/metrics.json: Metrics
    search/<class>.jsonl                   a search's journal: which answer reached its strategy when
    validation.json                        Validation: per class, the re-measured picks and the default
    timing.json                            samples per minute, per worker
    report.json, report.md, figures/, tuning_table.json    the report
    .dask/                                 cluster files (credentials, logs), never results

Records are ``TypedDict``: they are what the JSON holds, named and typed, with no conversion on the way in or
out (the files stay readable by anything that reads JSON).
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

import numpy as np
import pandas as pd

from launchtune.kernels import tuning_table
from launchtune.kernels.atomic import write_text

from ..errors import UserError
from ..jsonio import read_json, read_regular_bytes, write_json
from ..paths import within
from ..records import checked
from .checksums import check_meta, check_plan, meta_checksums, plan_checksums
from .ownership import Kind, require_owned
from .spec import SweepSpec

# What a fresh start (``--force`` with another plan, or ``combine`` into an old folder) removes, in a folder
# the project made (:mod:`pipeline.store.ownership`); anything else in it (PROVENANCE.md, logs) is kept.
MANAGED_DIRS = ("shards", "merged", "models", "plan", "figures", "search")
MANAGED_FILES = (
    "sweep.json",
    "validation.json",
    "report.json",
    "report.md",
    tuning_table.FILE_NAME,
    "timing.json",
    "dask-performance.html",
)


class PlanFacts(TypedDict):
    """What every class of a sweep shares: the launch space and the kernels."""

    params: list[str]
    values: dict[str, list[int]]
    default: dict[str, int] | None  # None: a Kernel Tuner cache's (it records no default launch)
    kernels: list[str]
    inactive: NotRequired[list[Any]]  # [parameter, values, parameters unused there]: space.Inactive
    # a workload that states its objective (a kernel spec's): its measures' columns and the objective
    measures: NotRequired[list[str]]
    objective: NotRequired[dict[str, str]]


PLAN_FACTS = (
    "params",
    "values",
    "default",
    "kernels",
    "inactive",
    "measures",
    "objective",
)  # what sweep.json's plan block keeps


class Plan(PlanFacts, total=False):
    """``plan/<class>.json``: the facts, the class's sampled configurations and the device they were drawn on.

    A committed plan may be slimmed to its facts (no ``configs``); the sweep redraws it from the seed.
    """

    configs: list[Any]  # (sampler, config) per sample id
    device: dict[str, Any]
    n_configs: int
    configs_file: str
    planned_with: dict[str, Any]  # the spec fields that decided the configurations (PLANNED_WITH)
    checksums: dict[str, str]  # launchtune.pipeline.store.checksums.plan_checksums; absent in older folders
    search: dict[str, Any]  # a live search's plan: the spec's search section (strategy, budget, prior)
    # a combined folder's (pipeline.learn.combine): the sweep folder or cache file the class came from, and a
    # Kernel Tuner cache's kernel and problem size
    source: str
    kernel_name: str
    problem_size: str


def plan_facts(source: Mapping[str, Any]) -> PlanFacts:
    """The plan facts of a plan, a worker's answer or another folder's ``sweep.json`` (its ``PLAN_FACTS``, in
    that order): what ``sweep.json``'s plan block keeps."""
    return cast(PlanFacts, {k: source[k] for k in PLAN_FACTS if k in source})  # PlanFacts' keys alone


_PLAN_KEYS = Plan.__required_keys__ | Plan.__optional_keys__


def as_plan(source: Mapping[str, Any]) -> Plan:
    """What a plan file records of ``source`` (a worker's answer): the keys a :class:`Plan` has, in
    ``source``'s order (a search's pool, kept in memory, is left out)."""
    return cast(Plan, {k: v for k, v in source.items() if k in _PLAN_KEYS})  # Plan's keys alone


# The spec fields that decide a plan's configurations, recorded in it: a plan is reused only by a sweep that
# agrees on all of them.
PLANNED_WITH = ("workload", "case", "size", "backend", "options", "samples", "samplers", "seed")


class SweepMeta(TypedDict, total=False):
    """``sweep.json``."""

    spec: dict[str, Any]
    planning_key: dict[str, Any]
    plan: PlanFacts
    updated: str
    combined: dict[str, Any]
    checksums: dict[str, str]  # launchtune.pipeline.store.checksums.meta_checksums; absent in older folders


class Metrics(TypedDict, total=False):
    """``models/metrics.json``: per group (class or ``combined``) its features, rows and model scores."""

    data_hash: str
    training_rows: dict[str, Any]  # how many ok rows each class had and how many training used
    seed: int
    test_fraction: float
    versions: dict[str, str]  # scikit-learn's, skops' and numpy's that fitted the models
    groups: dict[str, dict[str, Any]]
    comparison: dict[str, Any]
    loco: dict[str, Any]
    pairs: dict[str, Any]


# validation.json: per class, the re-measured candidates (``candidates``, best predicted first), the default,
# the model that picked them and the repeats.
Validation = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class SweepFolder:
    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    # -- layout ------------------------------------------------------------------------------------------
    @property
    def meta_path(self) -> Path:
        return self.path / "sweep.json"

    def _sub(self, *parts: str, what: str = "folder") -> Path:
        """``path / parts``, refused with one line where a symlink leads it out of the sweep folder: every
        folder the project writes under a sweep (and every file it writes without a rename) comes through
        here (``pipeline.paths.within``)."""
        return within(self.path, self.path.joinpath(*parts), what)

    @property
    def shards_dir(self) -> Path:
        return self._sub("shards")

    @property
    def merged_dir(self) -> Path:
        return self._sub("merged")

    @property
    def models_dir(self) -> Path:
        return self._sub("models")

    @property
    def figures_dir(self) -> Path:
        return self._sub("figures")

    @property
    def dask_dir(self) -> Path:
        return self._sub(".dask")

    @property
    def report_md(self) -> Path:
        return self.path / "report.md"

    @property
    def performance_report(self) -> Path:
        """The Dask performance report of the last measuring run (task stream, profile, worker use)."""
        return self.path / "dask-performance.html"

    def plan_path(self, gpu_class: str) -> Path:
        return self._sub("plan") / f"{gpu_class}.json"

    def shard_dir(self, gpu_class: str) -> Path:
        return self._sub("shards", f"gpu_class={gpu_class}")

    def search_journal(self, gpu_class: str) -> Path:
        """A search's answers in the order they reached its strategy (``pipeline.sweep.search``)."""
        return self._sub("search") / f"{gpu_class}.jsonl"

    def shard_path(self, gpu_class: str, batch: str) -> Path:
        return self.shard_dir(gpu_class) / f"shard-{batch}.parquet"

    def shards(self) -> list[Path]:
        return sorted(self.shards_dir.glob("gpu_class=*/shard-*.parquet"))

    def model_path(self, group: str, model: str) -> Path:
        return self._sub("models", group) / f"{model}.skops"

    def figure_path(self, name: str) -> Path:
        """A figure's file; it is written in place (matplotlib), so the file too must not lead out."""
        return self._sub("figures", name, what="figure")

    def is_sweep(self) -> bool:
        """A folder with a description and merged data (what the notebooks and reports can read)."""
        return self.meta_path.is_file() and self.merged_dir.is_dir()

    def clear(self, kind: Kind) -> None:
        """Remove everything a sweep or combine writes, keeping what the user put there; only in a folder
        the project made as ``kind`` (:mod:`launchtune.pipeline.store.ownership`)."""
        require_owned(self.path, kind, "clear it")
        for name in MANAGED_DIRS:
            shutil.rmtree(self.path / name, ignore_errors=True)
        for name in MANAGED_FILES:
            (self.path / name).unlink(missing_ok=True)

    # -- sweep.json --------------------------------------------------------------------------------------
    def read_meta(self) -> SweepMeta | None:
        """``sweep.json``, refused with one line where it was edited since it was written."""
        meta = checked(read_json(self.meta_path, "sweep description"), "sweep description", self.meta_path)
        if meta is None:
            return None
        check_meta(meta, str(self.meta_path))
        return meta

    def write_meta(self, meta: SweepMeta) -> None:
        body = {k: v for k, v in meta.items() if k != "checksums"}
        write_json(self.meta_path, {**body, "checksums": meta_checksums(body)})

    def planning_key(self) -> dict[str, Any] | None:
        """The planning key this folder was made with; None for a folder that holds no sweep yet."""
        meta = self.read_meta()
        if meta is None:
            return None
        if "planning_key" not in meta:
            raise UserError(f"{self.meta_path}: no planning_key (not written by `launchtune sweep`)")
        return meta["planning_key"]

    def read_spec(self) -> tuple[SweepSpec, PlanFacts]:
        """The spec the folder was made with and its plan facts; a user error where there is none."""
        meta = self.read_meta()
        if meta is None:
            raise UserError(f"{self.path}: not a sweep folder (no sweep.json; run `launchtune sweep` first)")
        try:
            return SweepSpec.from_dict(meta["spec"]), meta["plan"]
        except (KeyError, TypeError) as exc:
            raise UserError(f"{self.meta_path}: unreadable sweep description ({exc})") from None

    # -- the other JSON files ----------------------------------------------------------------------------
    def read_plan(self, gpu_class: str) -> Plan | None:
        """The plan with its ``configs`` (from the Parquet file beside the JSON, or inside an older JSON)."""
        plan = self.read_plan_facts(gpu_class)
        if plan is None or "configs_file" not in plan:
            return plan
        table = self._plan_configs(gpu_class, plan, None)
        params = [p for p in table.column_names if p != "sampler"]
        values = zip(*(table.column(p).to_pylist() for p in params), strict=True)
        samplers = table.column("sampler").to_pylist()
        plan["configs"] = [
            (s, dict(zip(params, v, strict=True))) for s, v in zip(samplers, values, strict=True)
        ]
        return plan

    def read_plan_samplers(self, gpu_class: str) -> list[str] | None:
        """The sampler of each planned sample id, without building the configurations (the merge's check)."""
        plan = self.read_plan_facts(gpu_class)
        if plan is None:
            return None
        if "configs_file" in plan:
            return self._plan_configs(gpu_class, plan, ["sampler"]).column("sampler").to_pylist()
        return [c[0] for c in plan["configs"]] if "configs" in plan else None

    def read_plan_matrix(self, gpu_class: str) -> tuple[list[str], np.ndarray] | None:
        """The planned parameter values as an int64 matrix (row = sample id, columns = ``params``), and the
        parameters; None where the plan holds no configurations."""
        plan = self.read_plan_facts(gpu_class)
        if plan is None:
            return None
        params = list(plan.get("params") or [])
        if "configs_file" in plan:
            table = self._plan_configs(gpu_class, plan, params)
            columns = [table.column(p).to_numpy() for p in params]
            n = table.num_rows
        elif "configs" in plan:
            columns = [np.array([c[1][p] for c in plan["configs"]], dtype=np.int64) for p in params]
            n = len(plan["configs"])
        else:
            return None
        matrix = np.column_stack(columns).astype(np.int64) if columns else np.zeros((n, 0), np.int64)
        return params, matrix

    def read_plan_facts(self, gpu_class: str) -> Plan | None:
        """``plan/<class>.json`` as written (its configurations file, where it names one, not read)."""
        path = self.plan_path(gpu_class)
        plan = checked(read_json(path, "plan"), "plan", path)
        if plan is not None and "configs_file" not in plan:
            check_plan(plan, None, str(self.plan_path(gpu_class)))
        return plan

    def _plan_configs(self, gpu_class: str, plan: Plan, columns: list[str] | None) -> Any:
        """The configurations file's table, its bytes checked against the plan's checksum first."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        name = plan["configs_file"]
        if not isinstance(name, str) or "/" in name or name in {".", ".."}:
            raise UserError(f"{self.plan_path(gpu_class)}: configs_file {name!r} is not a file name in plan/")
        path = self._sub("plan") / name
        data = read_regular_bytes(path, "plan configurations")
        check_plan(plan, data, str(self.plan_path(gpu_class)))
        try:
            return pq.read_table(pa.BufferReader(data), columns=columns)
        except (pa.ArrowException, OSError, KeyError) as exc:
            raise UserError(f"{path}: unreadable plan ({str(exc).splitlines()[0]})") from None

    def write_plan(self, gpu_class: str, plan: Plan) -> None:
        """The facts as JSON; the configurations, where there are any, as Parquet beside it: a JSON list of
        dicts was 40 MB at 10^5 samples and took the merge's check 1.5 GB of Python objects at 10^6
        (issue 18); columns of integers take 2 MB and read back in a second. Each carries its checksums."""
        facts = {k: v for k, v in plan.items() if k not in ("configs", "checksums")}
        if "configs" not in plan:
            write_json(self.plan_path(gpu_class), {**facts, "checksums": plan_checksums(facts, None)})
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        from launchtune.kernels.atomic import atomic_path

        configs = plan["configs"]
        params = list(plan["params"])
        matrix = np.array([[c[p] for p in params] for _, c in configs], dtype=np.int64).reshape(
            -1, len(params)
        )
        columns = {"sampler": pa.array([s for s, _ in configs], pa.string()).dictionary_encode()}
        columns.update({p: pa.array(matrix[:, j]) for j, p in enumerate(params)})
        name = f"{gpu_class}.configs.parquet"
        path = self._sub("plan") / name
        path.parent.mkdir(parents=True, exist_ok=True)
        sink = pa.BufferOutputStream()
        pq.write_table(pa.table(columns), sink, compression="zstd")
        data = sink.getvalue().to_pybytes()
        with atomic_path(path) as tmp:
            tmp.write_bytes(data)
        facts.update(n_configs=len(configs), configs_file=name)
        write_json(self.plan_path(gpu_class), {**facts, "checksums": plan_checksums(facts, data)})

    @staticmethod
    def _record(path: Path, kind: str) -> Any:
        """A JSON file of the folder, its shape checked (:mod:`pipeline.records`); None where missing."""
        return checked(read_json(path, kind), kind, path)

    def read_metrics(self) -> Metrics | None:
        return self._record(self.models_dir / "metrics.json", "model metrics")

    def write_metrics(self, metrics: Metrics) -> None:
        write_json(self.models_dir / "metrics.json", metrics)

    def read_validation(self) -> Validation | None:
        return self._record(self.path / "validation.json", "validation results")

    def write_validation(self, validation: Validation) -> None:
        write_json(self.path / "validation.json", validation)

    def read_timing(self) -> dict[str, Any] | None:
        return self._record(self.path / "timing.json", "timing")

    def write_timing(self, timing: dict[str, Any]) -> None:
        write_json(self.path / "timing.json", timing)

    def read_report(self) -> dict[str, Any] | None:
        return self._record(self.path / "report.json", "report")

    def read_tuning_table(self) -> dict[str, Any] | None:
        """The folder's tuning table (``kernels.tuning_table``, its one reader), None where there is none."""
        try:
            table: Any = tuning_table.read(tuning_table.in_folder(self.path), missing_ok=True)
            return table  # a TableDoc, its shape checked
        except tuning_table.TableError as exc:
            raise UserError(str(exc)) from None

    def write_report(self, report: dict[str, Any], markdown: str, table: tuning_table.TableDoc) -> None:
        write_json(self.path / "report.json", report)
        write_text(self.report_md, markdown)
        tuning_table.write(tuning_table.in_folder(self.path), table)


def ok_rows(frame: pd.DataFrame, gpu_class: str | None) -> pd.DataFrame:
    """The measured rows (status ok, a total time) of one class or all, in (class, sample) order."""
    rows = frame[(frame["status"] == "ok") & frame["total_ms"].notna()]
    if gpu_class is not None:
        rows = rows[rows["gpu_class"] == gpu_class]
    return rows.sort_values(["gpu_class", "sample_id"]).reset_index(drop=True)


def rows_by_class(ok: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """``ok_rows(frame, None)`` split by class, each part equal to ``ok_rows(frame, cls)``: one filter of the
    frame serves every group that reads it."""
    return {str(c): rows.reset_index(drop=True) for c, rows in ok.groupby("gpu_class", sort=True)}


def data_hash(frame: pd.DataFrame) -> str:
    """A hash of the merged rows without timestamps: models and re-measurements are current if it matches."""
    return hashlib.sha256(
        pd.util.hash_pandas_object(frame.drop(columns=["timestamp"]), index=False).values.tobytes()
    ).hexdigest()[:16]
