"""Proof that a folder's files are what the sweep wrote: a shard's configurations are its plan's, and neither
``sweep.json`` nor a plan was edited since.

- A shard carries, in its Parquet metadata, a digest of the configurations it measured (its sample ids and
  each one's parameter values, the plan's order) and the sweep's seed. A shard whose digest or seed is not
  its plan's (a shard of the same spec run with another seed, dropped into the folder) is not finished.
  Shards written before the digest existed are checked on their rows instead (the same digest, computed
  from their ``sample_id`` and parameter columns).
- ``sweep.json`` carries one short hash per field it records (``spec.<key>``, ``planning_key``, ``plan``,
  ``combined``), so an edit is refused naming the fields that differ; a plan carries the hash of its facts
  and of its configurations file. Files written before checksums existed carry none and are read as they are.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import UserError

SHARD_CONFIGS = b"launchtune.configs"  # Parquet metadata key: configs_digest of the shard's rows
SHARD_SEED = b"launchtune.seed"


class EditedFile(UserError):
    """A file of the folder no longer matches the checksum the project wrote into it."""


def configs_digest(ids: np.ndarray, matrix: np.ndarray, seed: int) -> str:
    """A digest of sample ids (ascending) and their parameter values (one row per id, the plan's parameter
    order) under ``seed``: equal exactly when the same configurations were planned under the same seed."""
    h = hashlib.sha256(f"seed={seed};".encode())
    h.update(np.ascontiguousarray(ids, dtype="<i8").tobytes())
    h.update(np.ascontiguousarray(matrix, dtype="<i8").tobytes())
    return h.hexdigest()[:32]


def rows_digest(rows: Sequence[tuple[int, str, Mapping[str, int]]], params: Sequence[str], seed: int) -> str:
    """:func:`configs_digest` of a batch's planned rows ``(sample id, sampler, config)``."""
    ordered = sorted(rows, key=lambda r: r[0])
    try:
        ids = np.array([r[0] for r in ordered], dtype=np.int64)
        matrix = np.array([[r[2][p] for p in params] for r in ordered], dtype=np.int64).reshape(len(ids), -1)
    except OverflowError:  # values no shard can hold (int64 columns): no shard can match this digest
        return "unrepresentable-" + short_hash([[r[0], [r[2][p] for p in params]] for r in ordered])
    return configs_digest(ids, matrix, seed)


def shard_metadata(
    rows: Sequence[tuple[int, str, Mapping[str, int]]], params: Sequence[str], seed: int
) -> dict[bytes, bytes]:
    """What a worker adds to a shard's Parquet metadata."""
    return {SHARD_CONFIGS: rows_digest(rows, params, seed).encode(), SHARD_SEED: str(seed).encode()}


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


def short_hash(value: Any) -> str:
    return hashlib.sha256(_canonical(value)).hexdigest()[:16]


def meta_checksums(meta: Mapping[str, Any]) -> dict[str, str]:
    """One hash per recorded field of ``sweep.json``: each spec key, the planning key, the plan, the block
    ``combine`` writes."""
    sums = {f"spec.{k}": short_hash(v) for k, v in (meta.get("spec") or {}).items()}
    for k in ("planning_key", "plan", "combined"):
        if k in meta:
            sums[k] = short_hash(meta[k])
    return sums


def check_meta(meta: Mapping[str, Any], where: str) -> None:
    """Refuse a ``sweep.json`` edited since it was written, naming what differs (no checksums: as it is)."""
    recorded = meta.get("checksums")
    if recorded is None:
        return
    if not isinstance(recorded, dict):
        raise EditedFile(f"{where}: checksums is not a mapping (edited by hand?)")
    now = meta_checksums(meta)
    differs = sorted(k for k in recorded.keys() | now.keys() if recorded.get(k) != now.get(k))
    if differs:
        more = f" and {len(differs) - 4} more" if len(differs) > 4 else ""
        raise EditedFile(
            f"{where}: edited since the sweep wrote it ({', '.join(differs[:4])}{more} differ); restore it, "
            "or rerun the sweep with --force to start the folder afresh"
        )


def plan_checksums(facts: Mapping[str, Any], configs: bytes | None) -> dict[str, str]:
    """The hashes a plan file carries: of its facts (everything but the checksums) and of the bytes of its
    configurations file, where it has one."""
    sums = {"facts": short_hash({k: v for k, v in facts.items() if k != "checksums"})}
    if configs is not None:
        sums["configs"] = hashlib.sha256(configs).hexdigest()[:16]
    return sums


def check_plan(plan: Mapping[str, Any], configs: bytes | None, where: str) -> None:
    recorded = plan.get("checksums")
    if recorded is None:
        return
    if not isinstance(recorded, dict):
        raise EditedFile(f"{where}: checksums is not a mapping (edited by hand?)")
    now = plan_checksums(plan, configs)
    differs = sorted(k for k in recorded.keys() | now.keys() if recorded.get(k) != now.get(k))
    if differs:
        what = " and ".join("its configurations file" if k == "configs" else "its facts" for k in differs)
        raise EditedFile(
            f"{where}: edited since it was planned ({what} differ); restore it, or rerun the sweep with "
            "--force to plan afresh"
        )
