"""Property: whatever a tuning table holds (any GPU class text, any values, nulls, missing parameters),
``export --format c-header`` writes a header whose every preprocessor line is one it means to write
(``#define NAME INTEGER`` within a C int, the ``#if defined(TARGET_...)`` chain) and whose comments end
where they should, or refuses with one line naming ``tuning_table.json``; never another exception."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from launchtune.pipeline.commands.export import write_c_header
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.spec import parse_spec
from tests.kernel.conftest import SOURCE, base_spec

value = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=4)
config = st.none() | st.dictionaries(st.sampled_from(["block_size_x", "tile", "other"]), value, max_size=3)
classes = st.text(max_size=12) | st.sampled_from(["h100", "A100", "a100", "h100 */\n#include <x>"])
entries = st.lists(
    st.fixed_dictionaries(
        {"gpu_class": classes, "best": config},
        optional={"default": config, "best_ms": st.none() | st.floats(0, 1e300)},
    ),
    max_size=3,
)
ALLOWED = re.compile(
    r"#pragma once|#ifndef kernel_tuner .*|#(el)?if defined\(TARGET_\w+\)  /\* [^\n]*\*/|#else .*|#endif .*"
    r"|#define [A-Za-z_]\w* -?\d+"
)


def _folder(root: Path) -> Path:
    (root / "scale.cu").write_text(SOURCE)
    (root / "kernel.yaml").write_text(yaml.safe_dump(base_spec()))
    sweep = {"name": "mine", "workload": "kernel", "case": "scale", "size": "1000",
             "options": {"spec": "kernel.yaml"}, "samplers": ["exhaustive"], "samples": 0}  # fmt: skip
    spec = parse_spec(sweep, str(root / "sweep.yaml"))
    folder = root / "sweep"
    folder.mkdir()
    (folder / "sweep.json").write_text(json.dumps({"spec": spec.to_dict(), "plan": {}}))
    return folder


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries)
def test_any_tuning_table_exports_a_clean_header_or_one_line(entries):
    with tempfile.TemporaryDirectory() as tmp:
        folder = _folder(Path(tmp))
        table = {"format": "launchtune.tuning_table/1", "version": 1, "entries": entries}
        (folder / "tuning_table.json").write_text(json.dumps(table))
        header = Path(tmp) / "x.h"
        try:
            write_c_header(folder, header)
        except UserError as exc:
            assert "\n" not in str(exc) and str(folder / "tuning_table.json") in str(exc)
            assert not header.exists()
            return
        text = header.read_text()
        for line in text.splitlines():
            if line.lstrip().startswith("#"):
                assert ALLOWED.fullmatch(line), line
                if line.startswith("#define"):
                    assert -(2**31) <= int(line.split()[2]) <= 2**31 - 1
        body = re.sub(r"/\*.*?\*/", "", text, flags=re.S)  # each comment ends where it is meant to
        assert "/*" not in body and "*/" not in body
