"""Shards on disk: which are finished, and the merge into one dataset (paths from ``store.folder``)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import UserError
from ..jsonio import check_regular, open_regular, read_regular_bytes
from .batching import measure_order
from .checksums import SHARD_CONFIGS, SHARD_SEED, configs_digest, rows_digest
from .folder import SweepFolder
from .journal import Journal
from .schema import OBJECTIVE_META, plan_schema, shard_schema

logger = logging.getLogger(__name__)


def _corrupt(path: Path, why: str) -> UserError:
    return UserError(
        f"{path}: corrupt shard ({why}); delete it and rerun the sweep to measure that batch again"
    )


def _shard_file(path: Path) -> pq.ParquetFile:
    """A shard opened from its bytes (:func:`pipeline.jsonio.read_regular_bytes`: a FIFO or a device named
    like a shard is one line, never a hang); a shard is one batch, small enough to read whole."""
    data = read_regular_bytes(path, "shard")
    assert data is not None
    return pq.ParquetFile(pa.BufferReader(data))


def read_shard(path: Path) -> pa.Table:
    """Read one shard or raise a UserError naming it: a truncated file must not crash the merge unnamed."""
    try:
        return _shard_file(path).read()
    except (pa.ArrowException, OSError) as exc:
        raise _corrupt(path, str(exc).splitlines()[0]) from None


def is_finished(path: Path) -> bool:
    """A shard whose footer reads (the quick test, without a plan; :func:`shard_problem` is the full one)."""
    try:
        _shard_file(path)
        return True
    except (UserError, pa.ArrowException, OSError):
        return False


def _ids(ids: Iterable[int], limit: int = 8) -> str:
    """``[3, 4, 9]`` -> ``"3, 4, 9"``; long lists cut with a count, so an error stays one line."""
    ids = sorted(ids)
    text = ", ".join(str(i) for i in ids[:limit])
    return text + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


@dataclass(frozen=True)
class Planned:
    """What a shard's configurations must match: the plan's parameters and the sweep's seed."""

    params: list[str]
    seed: int


def configs_problem(
    schema: pa.Schema, read: Callable[[list[str]], pa.Table], ids: np.ndarray, expected: str, planned: Planned
) -> str | None:
    """Why a shard's configurations are not the plan's (``expected``: :func:`configs_digest` of the plan's
    configurations at the shard's sample ids ``ids``), or None. A shard carrying its digest in its metadata
    (``schema``'s) is judged on it; an older one on its rows (``read`` reads columns: the parameters and
    ``seed``)."""
    meta = schema.metadata or {}
    if SHARD_CONFIGS in meta:
        seed = meta.get(SHARD_SEED, b"").decode(errors="replace")
        if seed != str(planned.seed):
            return f"measured with seed {seed[:20]}, this sweep's is {planned.seed}"
        if meta[SHARD_CONFIGS].decode(errors="replace") != expected:
            return "its configurations are not this folder's plan (a shard of another plan)"
        return None
    try:
        table = read(["sample_id", "seed", *planned.params]).sort_by("sample_id")
    except (pa.ArrowException, OSError, KeyError) as exc:
        return f"unreadable ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    seeds = set(table.column("seed").drop_null().to_pylist())
    if seeds - {planned.seed}:
        return f"measured with seed {sorted(seeds - {planned.seed})[0]}, this sweep's is {planned.seed}"
    columns = [table.column(p) for p in planned.params]
    if any(c.null_count for c in columns):
        return "its configurations are not this folder's plan (a parameter missing)"
    matrix = np.column_stack([c.to_numpy() for c in columns]) if columns else np.zeros((len(ids), 0))
    found = configs_digest(table.column("sample_id").to_numpy(), matrix, planned.seed)
    if found != expected:
        return "its configurations are not this folder's plan (a shard of another plan)"
    return None


def shard_problem(
    path: Path,
    sample_ids: Iterable[int],
    schema: pa.Schema | None = None,
    planned: tuple[Planned, str] | None = None,
) -> str | None:
    """Why the shard at ``path`` is not its batch's, or None when it is finished.

    Finished means: it reads, it has ``schema`` (the plan's; metadata aside), it holds exactly the batch's
    planned ``sample_ids``, each once, and (``planned``: the plan's parameters and seed, and the digest of
    the batch's configurations) their configurations and seed are the plan's. A valid Parquet file with 2 of
    a batch's 5 rows is not finished: kept, it would silently drop 3 samples from the merge; nor is one of
    the same ids measured from another seed's plan: kept, it would put another plan's rows in the data.
    """
    try:
        file = _shard_file(path)
        found_schema = file.schema_arrow
        ids = file.read(columns=["sample_id"]).column("sample_id").to_pylist()
    except UserError as exc:
        return str(exc).split(": ", 1)[-1]
    except (pa.ArrowException, OSError, KeyError) as exc:
        return f"unreadable ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    if schema is not None and not found_schema.equals(schema, check_metadata=False):
        return "its schema is not the plan's"
    counts = Counter(ids)
    planned_ids = set(sample_ids)
    problems = []
    if missing := planned_ids - counts.keys():
        problems.append(f"{len(missing)} of its {len(planned_ids)} planned samples missing ({_ids(missing)})")
    if doubled := [i for i, c in counts.items() if c > 1]:
        problems.append(f"samples {_ids(doubled)} twice")
    if extra := counts.keys() - planned_ids:
        problems.append(f"samples {_ids(extra)} not of its batch")
    if problems or planned is None:
        return "; ".join(problems) or None
    key, expected = planned
    ordered = np.sort(np.array(ids, dtype=np.int64))
    return configs_problem(found_schema, lambda columns: file.read(columns=columns), ordered, expected, key)


def set_aside(path: Path, reason: str, log: Callable[[str], None] = logger.info) -> Path:
    """Rename a shard that is not finished to ``<name>.incomplete-<n>`` (never deleted: it is evidence)."""
    n = 1
    while (target := path.with_name(f"{path.name}.incomplete-{n}")).exists():
        n += 1
    path.rename(target)
    if log is not None:
        log(f"{path}: {reason}; set aside as {target.name}, measuring its batch again")
    return target


def _plan_schema(folder: SweepFolder, cls: str) -> pa.Schema | None:
    """The schema a class's shards must have, from its plan (None where the folder has none)."""
    plan = folder.read_plan_facts(cls)
    if not plan or "params" not in plan or "kernels" not in plan:
        return None
    return plan_schema(plan)


def _planned_ids(folder: SweepFolder, cls: str) -> tuple[int, Callable[[int], str]]:
    """How many samples a class planned (ids ``0 .. n-1``) and the shard file a sample id belongs in (read
    without its configurations: only the samplers decide the batches). Without a readable plan the merge
    cannot tell a lost shard from an unplanned one, so it refuses with one line."""
    meta = folder.read_meta()
    if meta is None:
        raise UserError(
            f"{folder.path}: no sweep.json, so no plan to check the shards against; rerun the sweep, which "
            "writes it again"
        )
    plan = folder.read_plan_facts(cls)
    if plan and "search" in plan:
        return _search_ids(folder, cls, plan["search"])
    batch_size = (meta.get("spec") or {}).get("batch_size")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise UserError(
            f"{folder.meta_path}: spec.batch_size is {batch_size!r}, not a whole number >= 1; merge needs it "
            "to check the shards against the plan"
        )
    samplers = folder.read_plan_samplers(cls)
    if samplers is None:
        raise UserError(
            f"{folder.plan_path(cls)}: no plan of class {cls} with its configurations, so nothing to check "
            "its shards against; rerun the sweep, which plans it again"
        )

    def home(sample_id: int) -> str:
        # built only where samples are missing; batches hold consecutive ids
        if not names:
            ordered = measure_order([(s, None) for s in samplers], batch_size)
            for start, name in sorted((rows[0][0], batch) for batch, rows in ordered if rows):
                starts.append(start)
                names.append(folder.shard_path(cls, name).name)
        return names[max(0, int(np.searchsorted(starts, sample_id, side="right")) - 1)]

    starts: list[int] = []
    names: list[str] = []
    return len(samplers), home


def _search_ids(folder: SweepFolder, cls: str, search: dict) -> tuple[int, Callable[[int], str]]:
    """A search's samples are its proposals ``0 .. n-1``: as many as its journal has answers (each line one
    answer, ``pipeline.sweep.search.Journal``), else its budget; one shard each (Kernel Tuner's: one in
    all)."""
    path = folder.search_journal(cls)
    n = len(Journal(path).read()) if os.path.lexists(path) else int(search.get("budget", 0))
    kt = str(search.get("strategy", "")).startswith("kt:")

    def home(sample_id: int) -> str:
        return folder.shard_path(cls, "search-kt" if kt else f"search-{sample_id:05d}").name

    return n, home


def merged_rows(folder: SweepFolder) -> dict[str, int]:
    """Rows per class in ``DIR/merged`` now, from the files' footers (empty where there is no merge)."""
    counts: dict[str, int] = {}
    for path in sorted(folder.merged_dir.glob("gpu_class=*/*.parquet")):
        cls = path.parent.name.split("=", 1)[1]
        try:
            with open_regular(path, "merged data") as file:  # type: ignore[union-attr]
                counts[cls] = counts.get(cls, 0) + pq.read_metadata(file).num_rows
        except (pa.ArrowException, OSError) as exc:
            raise UserError(f"{path}: unreadable merged data ({str(exc).splitlines()[0]})") from None
    return counts


@dataclass(frozen=True)
class Merged:
    """What :func:`merge` wrote: the merged folder and its rows per class (the rows stay on disk)."""

    path: Path
    rows_per_class: dict[str, int]

    @property
    def num_rows(self) -> int:
        return sum(self.rows_per_class.values())


# Shards are read by a few threads (pyarrow reads without the GIL; a shard is small, so the time goes to
# opening files: 40,000 at 10^6 samples with batch 25) READ_CHUNK at a time, in order (a chunk's tables are
# all held until it is consumed: 256 shards of 3,517 rows made the 10^6-row merge peak at 751 MiB instead of
# 465, issue 18); merged rows are written in row groups of ROW_GROUP_ROWS, so the merge holds one chunk of
# shards and one row group, never the whole sweep (the in-memory merge peaked at 3.85 GiB at 10^6 rows).
T = TypeVar("T")
READ_THREADS = 4
READ_CHUNK = 16
ROW_GROUP_ROWS = 65_536


def _read_in_order(paths: list[Path], read: Callable[[Path], T]) -> Generator[T, None, None]:
    with ThreadPoolExecutor(READ_THREADS) as pool:
        for start in range(0, len(paths), READ_CHUNK):
            yield from pool.map(read, paths[start : start + READ_CHUNK])


def _ids_of_shard(path: Path) -> tuple[pa.Schema, pa.Table]:
    """A shard's schema and its ``gpu_class`` and ``sample_id`` columns (one read, two columns decoded)."""
    try:
        file = _shard_file(path)
        return file.schema_arrow, file.read(columns=["gpu_class", "sample_id"])
    except (pa.ArrowException, OSError, KeyError) as exc:
        raise _corrupt(path, str(exc).splitlines()[0]) from None


def merge(sweep_dir: Path, allow_missing: bool = False, log: Callable[[str], None] = logger.info) -> Merged:
    """Every shard's rows into ``DIR/merged`` (one file per gpu_class, sorted by sample id), replacing the
    old merge whole, streamed: checked first on the shards' ids alone, then copied shard by shard.

    Every sample appears once and every planned sample of each class is there, and no class ends with
    fewer rows than ``DIR/merged`` holds now (``allow_missing``: a time-limited sweep merges what it has, and
    says how much is missing). Without a readable plan (``sweep.json`` and ``plan/``) it refuses: it could
    not tell a lost shard from an unplanned one. Nothing is written unless every check passes.
    """
    folder = SweepFolder(sweep_dir)
    shards = folder.shards()
    if not shards:
        raise UserError(f"{sweep_dir}: no shards under {folder.shards_dir} (run `launchtune sweep` first)")
    schema: pa.Schema | None = None
    # sweep.json and the plans read (and checked) before any shard is: a broken one is refused before reader
    # threads start (an error leaving with pyarrow reads in flight could abort at interpreter exit)
    folder.read_meta()
    for path in shards:  # a FIFO or a device among them: refused before any thread opens anything
        check_regular(path, "shard")
    # per class, the plan's schema (None: the folder has no plan)
    planned = {
        cls: _plan_schema(folder, cls) for cls in sorted({p.parent.name.split("=", 1)[1] for p in shards})
    }
    # Per class: each shard's sample ids and the shard's index, as arrays; duplicates found once at the end
    # with numpy (a dict of lists per sample cost ~200 MB of Python objects at 10^6 rows, issue 18).
    ids_of: dict[str, list[np.ndarray]] = defaultdict(list)
    shard_of: dict[str, list[np.ndarray]] = defaultdict(list)
    index_of: dict[str, list[int]] = defaultdict(list)
    schemas: list[pa.Schema] = []  # each shard's, with its metadata (its configurations' digest)
    # closed before any error leaves: its reader threads must not outlive the merge
    with closing(_read_in_order(shards, _ids_of_shard)) as reading:
        for index, (path, (found, table)) in enumerate(zip(shards, reading, strict=True)):
            schemas.append(found)
            expected = path.parent.name.split("=", 1)[1]
            wanted = planned[expected]
            if wanted is not None and not found.equals(wanted, check_metadata=False):
                raise UserError(
                    f"{path}: its schema is not the plan's (a shard of another sweep?); move it away, or "
                    "rerun the sweep, which sets it aside and measures its batch again"
                )
            if schema is None:
                schema = found
            elif not found.equals(schema, check_metadata=False):
                raise UserError(
                    f"{path}: schema differs from {shards[0]} (shards of two different sweeps in one folder?)"
                )
            classes = set(table.column("gpu_class").unique().to_pylist())
            if classes - {expected}:
                raise UserError(
                    f"{path}: rows of class {sorted(classes)} in the folder of class {expected!r}"
                )
            sample_ids = table.column("sample_id").to_numpy()
            ids_of[expected].append(sample_ids)
            shard_of[expected].append(np.full(len(sample_ids), index))
            index_of[expected].append(index)
    for cls in ids_of:
        _check_class_ids(
            sweep_dir,
            folder,
            cls,
            np.concatenate(ids_of[cls]),
            np.concatenate(shard_of[cls]),
            shards,
            allow_missing,
            log,
        )
        if not _is_search(folder, cls):  # a search plans no configurations: its journal and shards agree
            _check_configs(
                folder, cls, [(shards[i], schemas[i], ids_of[cls][k]) for k, i in enumerate(index_of[cls])]
            )
    assert schema is not None
    objective = (schema.metadata or {}).get(OBJECTIVE_META)
    schema = schema.remove_metadata().with_metadata(
        {**shard_schema([], []).metadata, **({OBJECTIVE_META: objective} if objective else {})}
    )
    _check_no_fewer(folder, {cls: sum(len(a) for a in ids_of[cls]) for cls in ids_of}, allow_missing, log)
    parts = {cls: _shards_in_id_order([shards[i] for i in index_of[cls]], ids_of[cls]) for cls in ids_of}
    return _write_streamed(sweep_dir, schema, parts)


def _check_class_ids(
    sweep_dir: Path,
    folder: SweepFolder,
    cls: str,
    ids: np.ndarray,
    shard_index: np.ndarray,
    shards: list[Path],
    allow_missing: bool,
    log: Callable[[str], None] | None,
) -> None:
    """One class's sample ids (``ids``, each from shard ``shards[shard_index]``) against its plan: none in two
    shards, none the plan lacks, none missing (``allow_missing``: said, not refused)."""
    order = np.argsort(ids, kind="stable")
    ids, shard_index = ids[order], shard_index[order]
    repeated = ids[1:] == ids[:-1]
    if repeated.any():
        doubled = np.unique(ids[1:][repeated])
        i = int(doubled[0])
        names = [shards[j].name for j in shard_index[ids == i]]
        more = f" (and {len(doubled) - 1} more samples)" if len(doubled) > 1 else ""
        raise UserError(
            f"{sweep_dir}: sample {i} of class {cls} appears in two shards ({', '.join(names)}){more}"
        )
    n_planned, home = _planned_ids(folder, cls)
    outside = (ids < 0) | (ids >= n_planned)
    if outside.any():
        extra = ids[outside].tolist()
        raise UserError(f"{sweep_dir}: class {cls} has samples {_ids(extra)} that its plan does not have")
    if len(ids) < n_planned:
        present = np.zeros(n_planned, dtype=bool)
        present[ids] = True
        missing = np.flatnonzero(~present)
        batches = sorted({home(int(i)) for i in missing})
        text = (
            f"class {cls}: {len(missing)} of {n_planned} planned samples missing "
            f"({_ids(missing.tolist())}; in {_ids_names(batches)})"
        )
        if not allow_missing:
            raise UserError(f"{sweep_dir}: {text}; rerun the sweep to measure them")
        if log is not None:
            log(f"{text}; merged what is there")


def _is_search(folder: SweepFolder, cls: str) -> bool:
    plan = folder.read_plan_facts(cls)
    return plan is not None and "search" in plan  # (an empty plan holds no "search" either)


def _check_configs(folder: SweepFolder, cls: str, shards: list[tuple[Path, pa.Schema, np.ndarray]]) -> None:
    """Each shard's configurations and seed are its plan's (:func:`configs_problem`), else one line naming
    the first that is not."""
    meta = folder.read_meta() or {}
    seed = (meta.get("spec") or {}).get("seed")
    planned = folder.read_plan_matrix(cls)
    if planned is None or isinstance(seed, bool) or not isinstance(seed, int):
        raise UserError(
            f"{folder.plan_path(cls)}: no planned configurations or seed to check class {cls}'s shards "
            "against; rerun the sweep, which plans it again"
        )
    params, matrix = planned
    key = Planned(params, seed)
    for path, schema, ids in shards:
        ids = np.sort(ids)

        def read(columns: list[str], path: Path = path) -> pa.Table:  # an older shard's rows, read again
            return _shard_file(path).read(columns=columns)

        problem = configs_problem(schema, read, ids, configs_digest(ids, matrix[ids], seed), key)
        if problem is not None:
            raise UserError(
                f"{path}: {problem}; move it away, or rerun the sweep, which sets it aside and measures its "
                "batch again"
            )


def _check_no_fewer(
    folder: SweepFolder, rows: dict[str, int], allow_missing: bool, log: Callable[[str], None] | None
) -> None:
    """A merge never replaces a class's merged rows with fewer (a class whose shards are all gone included)
    unless ``allow_missing``."""
    for cls, before in merged_rows(folder).items():
        now = rows.get(cls, 0)
        if now >= before:
            continue
        text = f"merged/ holds {before} rows of class {cls}, its shards {now}"
        if not allow_missing:
            raise UserError(
                f"{folder.path}: {text}; merging would lose {before - now}: rerun the sweep to measure them, "
                "or --allow-missing to replace them anyway"
            )
        if log is not None:
            log(f"{text}; replaced with what the shards hold (--allow-missing)")


def _shards_in_id_order(paths: list[Path], ids: list[np.ndarray]) -> list[Path] | None:
    """The shards in sample-id order where copying them one after the other gives sorted rows (each holds
    increasing ids, and their ranges do not interleave: how batches are cut); None where they do not."""
    if any(len(a) and np.any(a[1:] <= a[:-1]) for a in ids):
        return None
    spans = sorted((int(a[0]), int(a[-1]), k) for k, a in enumerate(ids) if len(a))
    if any(spans[j + 1][0] <= spans[j][1] for j in range(len(spans) - 1)):
        return None
    return [paths[k] for _, _, k in spans]


def _write_streamed(sweep_dir: Path, schema: pa.Schema, parts: dict[str, list[Path] | None]) -> Merged:
    """``DIR/merged`` from each class's shards in id order (``None``: that class's shards interleave, read
    whole and sorted in memory), written into a temporary folder and renamed over the old merge."""
    target = SweepFolder(sweep_dir).merged_dir
    tmp = sweep_dir / f".merged-{uuid.uuid4().hex[:8]}.tmp"
    tmp.mkdir(parents=True)
    out_schema = schema.remove(schema.get_field_index("gpu_class"))
    rows: dict[str, int] = {}
    folder = SweepFolder(sweep_dir)
    try:
        for cls in sorted(parts):
            ordered = parts[cls]
            (tmp / f"gpu_class={cls}").mkdir()
            file = tmp / f"gpu_class={cls}" / "part-0.parquet"
            if ordered is None:  # interleaved shards (never cut by batches): sorted in memory
                paths = [p for p in folder.shards() if p.parent.name == f"gpu_class={cls}"]
                whole = pa.concat_tables(list(_read_in_order(paths, read_shard)))
                whole = whole.sort_by("sample_id").drop_columns(["gpu_class"])
                pq.write_table(whole, file, compression="zstd", row_group_size=ROW_GROUP_ROWS)
                rows[cls] = whole.num_rows
                continue
            n = 0
            reading = closing(_read_in_order(ordered, read_shard))
            with pq.ParquetWriter(file, out_schema, compression="zstd") as writer, reading as tables:
                pending: list[pa.Table] = []
                held = 0
                for table in tables:
                    pending.append(table.drop_columns(["gpu_class"]))
                    held += table.num_rows
                    if held >= ROW_GROUP_ROWS:
                        writer.write_table(pa.concat_tables(pending))
                        n += held
                        pending, held = [], 0
                if pending:
                    writer.write_table(pa.concat_tables(pending))
                    n += held
            rows[cls] = n
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _swap_in(tmp, target, sweep_dir)
    return Merged(target, rows)


def _swap_in(tmp: Path, target: Path, sweep_dir: Path) -> None:
    """``tmp`` renamed over ``target`` (the old merge moved aside first, removed after). Where a rename fails
    (a read-only or full disk), the old merge is put back and ``tmp`` removed: ``merged/`` is the old one or
    the new one, whole, and nothing half-written is left beside it."""
    old = None
    try:
        if target.exists():
            old = sweep_dir / f".merged-old-{uuid.uuid4().hex[:8]}.tmp"
            target.rename(old)
        tmp.rename(target)
    except BaseException:
        if old is not None and not target.exists():
            with contextlib.suppress(OSError):
                old.rename(target)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _ids_names(names: list[str], limit: int = 4) -> str:
    text = ", ".join(names[:limit])
    return text + (f" and {len(names) - limit} more" if len(names) > limit else "")


def write_merged(sweep_dir: Path, merged: pa.Table) -> pa.Table:
    """Write ``merged`` (sorted by class and sample) as ``DIR/merged``, replacing the old one whole."""
    merged = merged.sort_by([("gpu_class", "ascending"), ("sample_id", "ascending")])
    target = SweepFolder(sweep_dir).merged_dir
    tmp = sweep_dir / f".merged-{uuid.uuid4().hex[:8]}.tmp"
    # One file per class, written from zero-copy slices of the sorted table: the layout of
    # ``write_to_dataset(partition_cols=["gpu_class"])`` (the class in the folder name, not in the file)
    # without the second full copy that its grouping makes (issue 18: merge peak memory at 10^6 rows).
    classes = merged.column("gpu_class").to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.r_[True, classes[1:] != classes[:-1]]) if len(classes) else np.array([], int)
    bounds = list(starts) + [len(classes)]
    try:
        tmp.mkdir(parents=True)
        for k, start in enumerate(starts):
            part = merged.slice(int(start), int(bounds[k + 1] - start)).drop_columns(["gpu_class"])
            (tmp / f"gpu_class={classes[start]}").mkdir()
            pq.write_table(part, tmp / f"gpu_class={classes[start]}" / "part-0.parquet", compression="zstd")
    except BaseException:  # a full disk: no half-written folder left beside the old merge
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _swap_in(tmp, target, sweep_dir)
    return merged


def load_merged(sweep_dir: Path) -> pd.DataFrame:
    """The merged data as a DataFrame with ``gpu_class`` as a plain string column."""
    target = SweepFolder(sweep_dir).merged_dir
    if not target.is_dir() or not any(target.glob("gpu_class=*/*.parquet")):
        raise UserError(f"{sweep_dir}: no merged data in {target} (run `launchtune merge {sweep_dir}`)")
    # pyarrow's dataset opens the files itself: each is checked to be a regular file first, so a FIFO in
    # merged/ is one line rather than a read that never returns (a FIFO swapped in after the check is a race
    # only someone writing into the folder at that moment could win)
    for path in target.rglob("*"):
        if not path.is_dir():
            check_regular(path, "merged data")
    try:
        frame = pq.read_table(target, partitioning="hive").to_pandas()
    except (pa.ArrowException, OSError) as exc:
        raise UserError(f"{target}: unreadable merged data ({str(exc).splitlines()[0]})") from None
    # the columns every step after the merge reads: one missing (a part written by hand) is one line here,
    # not a KeyError in training or the report
    for column, numeric in (("sample_id", True), ("gpu_class", False), ("status", False), ("total_ms", True)):
        if column not in frame.columns:
            raise UserError(f"{target}: the merged data has no column {column!r}; rerun the merge")
        if numeric and not pd.api.types.is_numeric_dtype(frame[column]):
            raise UserError(f"{target}: the merged data's column {column!r} is not numeric; rerun the merge")
    frame["gpu_class"] = frame["gpu_class"].astype(str)
    return frame.sort_values(["gpu_class", "sample_id"]).reset_index(drop=True)


def pending_batches(
    out: Path,
    cls: str,
    ordered: list[tuple[str, list]],
    schema: pa.Schema | None = None,
    log: Callable[[str], None] = logger.info,
    planned: Planned | None = None,
) -> tuple[list, int]:
    """The batches of ``ordered`` still to measure, and how many are finished already.

    A shard is finished only when it holds exactly its batch's planned sample ids, once each, with the plan's
    ``schema`` and (``planned``: the plan's parameters and the sweep's seed) the plan's configurations and
    seed (:func:`shard_problem`); any other shard on a batch's name is set aside (renamed
    ``.incomplete-<n>``, one ``log`` line) and its batch measured again.
    A tail part counts as finished also where its whole batch's shard is on disk: a folder measured before
    the tail was cut holds ``shard-00107.parquet``, and measuring ``00107.0`` too would double its samples.
    """
    folder = SweepFolder(out)
    whole_rows: dict[str, list] = {}
    for batch, rows in ordered:
        whole_rows.setdefault(batch.split(".", 1)[0], []).extend(rows)

    def finished(batch: str, rows: list) -> bool:
        path = folder.shard_path(cls, batch)
        if not path.exists():
            return False
        key = None if planned is None else (planned, rows_digest(rows, planned.params, planned.seed))
        problem = shard_problem(path, [r[0] for r in rows], schema, key)
        if problem is None:
            return True
        set_aside(path, problem, log)
        return False

    todo, done = [], 0
    for batch, rows in ordered:
        whole = batch.split(".", 1)[0]
        if finished(batch, rows) or (whole != batch and finished(whole, whole_rows[whole])):
            done += 1
        else:
            todo.append((batch, rows))
    return todo, done
