"""``benchmarks/tridiag_summary.py`` on the committed measurements: the READMEs' facts."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data" / "tridiag"
CLASSES = ("h100", "h200")


def _module():
    spec = importlib.util.spec_from_file_location(
        "tridiag_summary", REPO / "benchmarks" / "tridiag_summary.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.fixture(scope="module")
def summ():
    return _module()


@pytest.fixture(scope="module")
def tables(summ):
    out = {}
    for c in CLASSES:
        streams, base, meta = summ.load(DATA / c / "streams")
        out[c] = (summ.per_size(streams, base), meta)
    return out


@pytest.mark.parametrize("c", CLASSES)
def test_every_point_is_correct_and_every_seed_size_but_1e8_is_there(tables, c):
    t, meta = tables[c]
    seed = sorted({int(round(f * 10**i)) for i in range(3, 8) for f in (1, 2.5, 4, 5, 7.5, 8)})
    assert list(t.index) == seed  # 30 sizes; 10^8 not measured (README says why)
    assert t["worst_residual"].max() < 1e-15
    assert meta["device"]["gpu_class"] == c and meta["device"]["cupy_version"] == "14.2.0"


@pytest.mark.parametrize("c", CLASSES)
def test_streams_help_only_from_a_few_hundred_thousand_unknowns(tables, c):
    t, _ = tables[c]
    small = t[t.index < 250_000]
    assert (small["raw_k"] == 1).all() and (small["dev_k"] == 1).all()
    big = t[t.index >= 10**6]
    assert set(big["dev_k"]) <= {4, 8, 16}
    assert big["den_x"].between(1.04, 1.10).all()  # the robust speed-up; the raw one reaches 1.6-2.0
    assert (big["den_over_gtsv2"] > 1.7).all()  # gtsv2 stays ~2x faster end to end


def test_flagged_sizes_are_the_host_stage_outliers(tables):
    flagged = {c: sorted(tables[c][0].index[tables[c][0]["flag"]]) for c in CLASSES}
    assert flagged == {"h100": [750_000, 5_000_000], "h200": [2_500_000, 5_000_000]}


def test_comparison_and_cli_run(summ, capsys):
    assert summ.main([str(DATA / "h100" / "streams"), str(DATA / "h200" / "streams")]) == 0
    out = capsys.readouterr().out
    assert "h100's k on h200: lost %" in out and "copy bandwidth h200 / h100" in out


# -- the stage-2 benchmark's folder (issue 21) ------------------------------------------------------------
GPU_STAGE2 = DATA / "h100" / "streams_gpu"


def test_stage2_folder_every_point_correct_and_every_seed_size(summ):
    assert summ.has_stage2(GPU_STAGE2) and not summ.has_stage2(DATA / "h100" / "streams")
    streams, base, extra, tuning, meta = summ.load_stage2(GPU_STAGE2)
    assert len(base) == 31 and base.index.max() == 10**8
    assert set(streams["stage2"]) == {"host", "gpu"} and len(streams) == 31 * 2 * 6
    assert (streams["residual"] < 1e-12).all()
    assert (base["dev_ours_residual"] < 1e-12).all()
    assert (extra.loc[extra["kind"] == "beyond", "residual"] < 1e-12).all()
    assert meta["commit"] and meta["device"]["gpu_class"] == "h100"


def test_stage2_tables_render_from_the_data(summ):
    streams, base, extra, tuning, _ = summ.load_stage2(GPU_STAGE2)
    facts = summ.stage2_facts(streams, base)
    assert "within 1.05x at" in facts and "of 13" in facts
    host = summ.stage2_host_table(base).splitlines()
    dev = summ.stage2_device_table(base).splitlines()
    assert len(host) == len(dev) == 2 + 31
    assert "100,000,000" in host[-1] and "100,000,000" in dev[-1]
    assert "250,000,000" in summ.stage2_extras(extra, tuning)
