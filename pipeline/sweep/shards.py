"""Shards on disk: which are finished, and the merge into one dataset (paths: :mod:`pipeline.sweep.folder`).
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import UserError
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
    """A shard counts as finished when its footer reads; a rerun re-measures anything else."""
    if not path.is_file():
        return False
    try:
        pq.read_metadata(path)
        return True
    except (pa.ArrowException, OSError):
        return False


def merge(sweep_dir: Path) -> pa.Table:
    """Concatenate every shard into ``DIR/merged`` (by gpu_class), replacing the old merge whole."""
    folder = SweepFolder(sweep_dir)
    shards = folder.shards()
    if not shards:
        raise UserError(
            f"{sweep_dir}: no shards under {folder.shards_dir} (run `python -m pipeline sweep` first)"
        )
    tables = []
    for path in shards:
        table = read_shard(path)
        if tables and not table.schema.equals(tables[0].schema, check_metadata=False):
            raise UserError(
                f"{path}: schema differs from {shards[0]} (shards of two different sweeps in one folder?)"
            )
        expected = path.parent.name.split("=", 1)[1]
        classes = set(table.column("gpu_class").to_pylist())
        if classes - {expected}:
            raise UserError(f"{path}: rows of class {sorted(classes)} in the folder of class {expected!r}")
        tables.append(table)
    merged = pa.concat_tables(tables)
    keys = merged.select(["gpu_class", "sample_id"]).to_pandas()
    dupes = keys[keys.duplicated()]
    if len(dupes):
        row = dupes.iloc[0]
        raise UserError(f"{sweep_dir}: sample {row.sample_id} of class {row.gpu_class} appears in two shards")
    return write_merged(sweep_dir, merged)


def write_merged(sweep_dir: Path, merged: pa.Table) -> pa.Table:
    """Write ``merged`` (sorted by class and sample) as ``DIR/merged``, replacing the old one whole."""
    merged = merged.sort_by([("gpu_class", "ascending"), ("sample_id", "ascending")])
    target = SweepFolder(sweep_dir).merged_dir
    tmp = sweep_dir / f".merged-{uuid.uuid4().hex[:8]}.tmp"
    pq.write_to_dataset(
        merged, tmp, partition_cols=["gpu_class"], basename_template="part-{i}.parquet", compression="zstd"
    )
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
