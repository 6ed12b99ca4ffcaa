"""Shards on disk: which are finished, and the merge into one dataset.

Paths come from :mod:`pipeline.sweep.folder`.
"""

from __future__ import annotations

import shutil
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import UserError
from pipeline.sweep.batching import measure_order
from pipeline.sweep.folder import SweepFolder


def read_shard(path: Path) -> pa.Table:
    """Read one shard or raise a UserError naming it: a truncated file must not crash the merge unnamed."""
    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise UserError(
            f"{path}: corrupt shard ({str(exc).splitlines()[0]}); delete it and rerun the sweep to measure "
            "that batch again"
        ) from None


def is_finished(path: Path) -> bool:
    """A shard whose footer reads (the quick test, without a plan; :func:`shard_problem` is the full one)."""
    if not path.is_file():
        return False
    try:
        pq.read_metadata(path)
        return True
    except (pa.ArrowException, OSError):
        return False


def _ids(ids: Iterable[int], limit: int = 8) -> str:
    """``[3, 4, 9]`` -> ``"3, 4, 9"``; long lists cut with a count, so an error stays one line."""
    ids = sorted(ids)
    text = ", ".join(str(i) for i in ids[:limit])
    return text + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def shard_problem(path: Path, sample_ids: Iterable[int], schema: pa.Schema | None = None) -> str | None:
    """Why the shard at ``path`` is not its batch's, or None when it is finished.

    Finished means: it reads, it has ``schema`` (the plan's; metadata aside) and it holds exactly the batch's
    planned ``sample_ids``, each once. A valid Parquet file with 2 of a batch's 5 rows is not finished: kept,
    it would silently drop 3 samples from the merge.
    """
    try:
        found_schema = pq.read_schema(path)
        ids = pq.read_table(path, columns=["sample_id"]).column("sample_id").to_pylist()
    except (pa.ArrowException, OSError, KeyError) as exc:
        return f"unreadable ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    if schema is not None and not found_schema.equals(schema, check_metadata=False):
        return "its schema is not the plan's"
    counts = Counter(ids)
    planned = set(sample_ids)
    problems = []
    if missing := planned - counts.keys():
        problems.append(f"{len(missing)} of its {len(planned)} planned samples missing ({_ids(missing)})")
    if doubled := [i for i, c in counts.items() if c > 1]:
        problems.append(f"samples {_ids(doubled)} twice")
    if extra := counts.keys() - planned:
        problems.append(f"samples {_ids(extra)} not of its batch")
    return "; ".join(problems) or None


def set_aside(path: Path, reason: str, log: Callable[[str], None] | None = None) -> Path:
    """Rename a shard that is not finished to ``<name>.incomplete-<n>`` (never deleted: it is evidence)."""
    n = 1
    while (target := path.with_name(f"{path.name}.incomplete-{n}")).exists():
        n += 1
    path.rename(target)
    if log is not None:
        log(f"{path}: {reason}; set aside as {target.name}, measuring its batch again")
    return target


def _planned_ids(folder: SweepFolder, cls: str) -> tuple[set[int], dict[int, str]] | None:
    """A class's planned sample ids and the shard file each belongs in, where the folder has its plan."""
    plan = folder.read_plan(cls)
    meta = folder.read_meta()
    batch_size = ((meta or {}).get("spec") or {}).get("batch_size")
    if not plan or "configs" not in plan or not isinstance(batch_size, int) or batch_size < 1:
        return None
    where = {}
    for batch, rows in measure_order(plan["configs"], batch_size):
        for sample_id, _, _ in rows:
            where[sample_id] = folder.shard_path(cls, batch).name
    return set(range(len(plan["configs"]))), where


def merge(sweep_dir: Path, allow_missing: bool = False, log: Callable[[str], None] | None = None) -> pa.Table:
    """Concatenate every shard into ``DIR/merged`` (by gpu_class), replacing the old merge whole.

    Every sample appears once; where the folder has its plan, every planned sample of each class must be
    there too (``allow_missing``: a time-limited sweep merges what it has, and says how much is missing).
    """
    folder = SweepFolder(sweep_dir)
    shards = folder.shards()
    if not shards:
        raise UserError(
            f"{sweep_dir}: no shards under {folder.shards_dir} (run `python -m pipeline sweep` first)"
        )
    tables = []
    # Per class: each shard's sample ids and the shard's index, as arrays; duplicates found once at the end
    # with numpy (a dict of lists per sample cost ~200 MB of Python objects at 10^6 rows, issue 18).
    ids_of: dict[str, list[np.ndarray]] = defaultdict(list)
    shard_of: dict[str, list[np.ndarray]] = defaultdict(list)
    for index, path in enumerate(shards):
        table = read_shard(path)
        if tables and not table.schema.equals(tables[0].schema, check_metadata=False):
            raise UserError(
                f"{path}: schema differs from {shards[0]} (shards of two different sweeps in one folder?)"
            )
        expected = path.parent.name.split("=", 1)[1]
        classes = set(table.column("gpu_class").to_pylist())
        if classes - {expected}:
            raise UserError(f"{path}: rows of class {sorted(classes)} in the folder of class {expected!r}")
        sample_ids = table.column("sample_id").to_numpy()
        ids_of[expected].append(sample_ids)
        shard_of[expected].append(np.full(len(sample_ids), index))
        tables.append(table)
    for cls in ids_of:
        ids_cls, shard_cls = np.concatenate(ids_of[cls]), np.concatenate(shard_of[cls])
        order = np.argsort(ids_cls, kind="stable")
        ids_cls, shard_cls = ids_cls[order], shard_cls[order]
        repeated = ids_cls[1:] == ids_cls[:-1]
        if repeated.any():
            doubled = np.unique(ids_cls[1:][repeated])
            i = int(doubled[0])
            names = [shards[j].name for j in shard_cls[ids_cls == i]]
            more = f" (and {len(doubled) - 1} more samples)" if len(doubled) > 1 else ""
            raise UserError(
                f"{sweep_dir}: sample {i} of class {cls} appears in two shards ({', '.join(names)}){more}"
            )
        planned = _planned_ids(folder, cls)
        if planned is None:
            continue
        ids, home = planned
        where = set(ids_cls.tolist())
        if extra := where - ids:
            raise UserError(f"{sweep_dir}: class {cls} has samples {_ids(extra)} that its plan does not have")
        if missing := ids - where:
            batches = sorted({home[i] for i in missing})
            text = (
                f"class {cls}: {len(missing)} of {len(ids)} planned samples missing ({_ids(missing)}; "
                f"in {_ids_names(batches)})"
            )
            if not allow_missing:
                raise UserError(f"{sweep_dir}: {text}; rerun the sweep to measure them")
            if log is not None:
                log(f"{text}; merged what is there")
    merged = pa.concat_tables(tables)
    return write_merged(sweep_dir, merged)


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
    tmp.mkdir(parents=True)
    for k, start in enumerate(starts):
        part = merged.slice(int(start), int(bounds[k + 1] - start)).drop_columns(["gpu_class"])
        (tmp / f"gpu_class={classes[start]}").mkdir()
        pq.write_table(part, tmp / f"gpu_class={classes[start]}" / "part-0.parquet", compression="zstd")
    old = None
    if target.exists():
        old = sweep_dir / f".merged-old-{uuid.uuid4().hex[:8]}.tmp"
        target.rename(old)
    tmp.rename(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return merged


def load_merged(sweep_dir: Path) -> pd.DataFrame:
    """The merged data as a DataFrame with ``gpu_class`` as a plain string column."""
    target = SweepFolder(sweep_dir).merged_dir
    if not target.is_dir() or not any(target.glob("gpu_class=*/*.parquet")):
        raise UserError(
            f"{sweep_dir}: no merged data in {target} (run `python -m pipeline merge {sweep_dir}`)"
        )
    try:
        frame = pq.read_table(target, partitioning="hive").to_pandas()
    except (pa.ArrowException, OSError) as exc:
        raise UserError(f"{target}: unreadable merged data ({str(exc).splitlines()[0]})") from None
    frame["gpu_class"] = frame["gpu_class"].astype(str)
    return frame.sort_values(["gpu_class", "sample_id"]).reset_index(drop=True)


def pending_batches(
    out: Path,
    cls: str,
    ordered: list[tuple[str, list]],
    schema: pa.Schema | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[list, int]:
    """The batches of ``ordered`` still to measure, and how many are finished already.

    A shard is finished only when it holds exactly its batch's planned sample ids, once each, with the plan's
    ``schema`` (:func:`shard_problem`); any other shard on a batch's name is set aside
    (renamed ``.incomplete-<n>``, one ``log`` line) and its batch measured again.
    A tail part counts as finished also where its whole batch's shard is on disk: a folder measured before
    the tail was cut holds ``shard-00107.parquet``, and measuring ``00107.0`` too would double its samples.
    """
    folder = SweepFolder(out)
    whole_ids: dict[str, list[int]] = {}
    for batch, rows in ordered:
        whole_ids.setdefault(batch.split(".", 1)[0], []).extend(r[0] for r in rows)

    def finished(batch: str, ids: list[int]) -> bool:
        path = folder.shard_path(cls, batch)
        if not path.is_file():
            return False
        problem = shard_problem(path, ids, schema)
        if problem is None:
            return True
        set_aside(path, problem, log)
        return False

    todo, done = [], 0
    for batch, rows in ordered:
        whole = batch.split(".", 1)[0]
        if finished(batch, [r[0] for r in rows]) or (whole != batch and finished(whole, whole_ids[whole])):
            done += 1
        else:
            todo.append((batch, rows))
    return todo, done
