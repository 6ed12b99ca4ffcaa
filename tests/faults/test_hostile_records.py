"""Property: any JSON where the project reads a record back (a Kernel Tuner cache, a folder's metrics,
validation, timing, report, tuning table, marker) is read or refused with one line naming the file; never
another exception. Hypothesis draws the JSON; a few dozen examples keep it fast."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.datasets import load_kernel_tuner_cache
from launchtune.pipeline.store.folder import SweepFolder
from launchtune.pipeline.store.ownership import marker_kind

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
entry = st.dictionaries(st.sampled_from(["a", "b", "time", "times", "x"]), json_values, max_size=5)
caches = st.fixed_dictionaries(
    {
        "tune_params_keys": st.one_of(st.just(["a", "b"]), json_values),
        "cache": st.one_of(st.dictionaries(st.text(max_size=5), entry, max_size=5), json_values),
    },
    optional={"objective": json_values, "device_name": json_values, "kernel_name": json_values},
)


def _one_line(exc: UserError, path: Path) -> None:
    assert "\n" not in str(exc) and str(path) in str(exc)


@settings(max_examples=40, deadline=None)
@given(st.one_of(caches, json_values))
def test_any_json_as_a_kernel_tuner_cache_is_read_or_refused_in_one_line(raw):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cache.json"
        path.write_text(json.dumps(raw))
        try:
            dataset = load_kernel_tuner_cache(path)
        except UserError as exc:
            _one_line(exc, path)
        else:
            assert len(dataset.frame) >= 1 and dataset.params == [
                p for p in dataset.params if isinstance(p, str)
            ]


RECORDS = {
    "models/metrics.json": "read_metrics",
    "validation.json": "read_validation",
    "timing.json": "read_timing",
    "report.json": "read_report",
    "tuning_table.json": "read_tuning_table",
    "sweep.json": "read_meta",
    "plan/cpu.json": "read_plan",
}


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(RECORDS)), json_values)
def test_any_json_as_a_folder_record_is_read_or_refused_in_one_line(name, raw):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(raw))
        try:
            getattr(SweepFolder(Path(tmp)), RECORDS[name])(*(["cpu"] if name.startswith("plan/") else []))
        except UserError as exc:
            _one_line(exc, path)
        (Path(tmp) / ".launchtune").write_text(json.dumps(raw))
        try:
            marker_kind(Path(tmp))
        except UserError as exc:
            _one_line(exc, Path(tmp) / ".launchtune")
