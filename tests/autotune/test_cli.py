"""``python -m kernels.cfd run --autotune ...`` end to end on the numpy backend (the real CLI, subprocess; its
refusals of bad options in process, ``cli.main``)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, call_main

pytest.importorskip("launchtune.kernels.cfd.cli")
RUN = [
    sys.executable,
    "-m",
    "launchtune.kernels.cfd",
    "run",
    "--case",
    "inlet",
    "--size",
    "16x8",
    "--backend",
    "numpy",
]


def cfd(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*RUN, "--no-plot", *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_scan_then_seeded_from_the_exported_table(tmp_path):
    scan = cfd("--steps", "370", "--autotune", "scan", "--out", str(tmp_path / "scan"))
    assert scan.returncode == 0, scan.stderr
    summary = json.loads((tmp_path / "scan" / "summary.json").read_text())
    tuned = summary["autotune"]["kernels"]
    assert len(tuned) == 7
    # the paper space (10 x 12) plus the default; warm-up + 3 samples each of one step's 4 launches (stages)
    launches = 1 + 3 * 4 * 121
    assert all(k["first_scan_launches"] == launches and k["first_scan_steps"] == 364 for k in tuned.values())
    assert summary["autotune"]["all_tuned_at_step"] == 363
    rows = list(csv.DictReader(open(tmp_path / "scan" / "launches.csv")))
    # every scan launch, and one idle launch in 101 (the first of the 370 * 4 - 1453 = 27 idle launches)
    assert len(rows) == 7 * (launches + 1)
    assert {r["state"] for r in rows} == {"startup", "idle"}
    assert all(float(r["time_ms"]) >= 0 for r in rows)

    table = tmp_path / "scan" / "tuning_table.json"
    seeded = cfd(
        "--steps", "3", "--autotune", "seeded", "--tuning-table", str(table), "--out", str(tmp_path / "s")
    )
    assert seeded.returncode == 0, seeded.stderr
    again = json.loads((tmp_path / "s" / "summary.json").read_text())["autotune"]["kernels"]
    for name, k in again.items():
        assert k["restored"] and k["nonoptimal_launches"] == 0
        assert (k["blocks"], k["threads"]) == (tuned[name]["blocks"], tuned[name]["threads"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--autotune", "seeded"], "--tuning-table"),
        (["--autotune", "fast"], "--autotune"),
        (["--autotune", "seeded", "--tuning-table", "BAD"], "BAD"),
    ],
)
def test_bad_tuning_options_are_one_line_and_exit_2(tmp_path, args, message):
    bad = tmp_path / "bad.json"
    bad.write_text('{"entries": [{"gpu_class": "cpu"}]}')
    args = [str(bad) if a == "BAD" else a for a in args]
    out = tmp_path / "out"
    from launchtune.kernels.cfd.cli import main

    r = call_main(main, [*RUN[3:], "--no-plot", "--steps", "2", "--out", str(out), *args])
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message.replace("BAD", str(bad)) in lines[0]
    assert not out.exists()
