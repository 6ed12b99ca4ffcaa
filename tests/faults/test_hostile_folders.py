"""Property: whatever is done to a measured, merged sweep folder's files (deleted, replaced by a FIFO, a
directory or garbage, truncated, a JSON value swapped for any other), ``merge`` either refuses with one line
or merges every planned sample; it never raises anything else, never hangs, never writes fewer rows.

Hypothesis draws the damage; a handful of examples keeps it fast (each builds a folder of 3 shards)."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import zlib
from pathlib import Path

import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.shards import merge
from tests.faults.test_plan_checks import _folder, _shard

TARGETS = [
    "sweep.json",
    "plan/cpu.json",
    "plan/cpu.configs.parquet",
    "shards/gpu_class=cpu/shard-00000.parquet",
    "shards/gpu_class=cpu/shard-00001.parquet",
    ".launchtune",
]
HANG_S = 60  # a merge of 12 rows takes well under a second; only a hang reaches this

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
damage = st.tuples(
    st.sampled_from(TARGETS),
    st.sampled_from(["delete", "fifo", "dir", "garbage", "truncate", "edit"]),
    st.lists(st.text(max_size=12), min_size=1, max_size=3),  # which key to edit (mapped onto real keys)
    json_values,
)


def _keys(data, picks: list[str]) -> list:
    """A path of real keys into ``data``, chosen by ``picks`` (each pick's CRC selects a key)."""
    path: list = []
    for pick in picks:
        if isinstance(data, dict) and data:
            key = sorted(data)[zlib.crc32(pick.encode()) % len(data)]
        elif isinstance(data, list) and data:
            key = zlib.crc32(pick.encode()) % len(data)
        else:
            break
        path.append(key)
        data = data[key]
    return path


def _apply(root: Path, target: str, action: str, picks: list[str], value) -> None:
    path = root / target
    if not path.exists() and not path.is_symlink():
        return
    regular = path.is_file()
    if action == "edit":
        if not regular or (path.suffix != ".json" and path.name != ".launchtune"):
            return
        try:
            data = json.loads(path.read_text())
        except ValueError:  # garbage already
            return
        keys = _keys(data, picks)
        if not keys:
            data = value
        else:
            holder = data
            for k in keys[:-1]:
                holder = holder[k]
            holder[keys[-1]] = value
        path.write_text(json.dumps(data))
        return
    if action == "truncate":
        if regular:
            data = path.read_bytes()
            path.write_bytes(data[: len(data) // 2])
        return
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    else:
        path.unlink()
    if action == "fifo":
        os.mkfifo(path)
    elif action == "dir":
        path.mkdir()
    elif action == "garbage":
        path.write_bytes(b"PAR1\x00garbage{")


def _alarm(signum, frame):  # pragma: no cover - only a hang gets here
    raise TimeoutError("merge hung on a hostile folder")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(damage, min_size=1, max_size=3))
def test_merge_on_a_damaged_folder_refuses_in_one_line_or_merges_every_sample(damages):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder, order = _folder(root)
        for batch, rows in order:
            _shard(folder.shard_path("cpu", batch), rows)
        assert merge(root).num_rows == 12
        for target, action, picks, value in damages:
            _apply(root, target, action, picks, value)
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(HANG_S)
        try:
            merged = merge(root)
        except UserError as exc:
            assert "\n" not in str(exc) and str(exc).strip()
        else:
            assert merged.num_rows == 12 and merged.rows_per_class == {"cpu": 12}
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        part = folder.merged_dir / "gpu_class=cpu" / "part-0.parquet"
        assert pq.read_metadata(part).num_rows == 12  # the merge on disk never holds fewer
