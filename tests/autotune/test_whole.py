"""Run-time tuning of whole configurations (the fused CFD space, issue 16): a fake solver whose steps cost
what the test says, the table reader, and the CLI on the numpy backend."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from launchtune.kernels.autotune import IDLE, TableError, TunerError
from launchtune.kernels.autotune.whole import WholeTuner, config_key, table_configurations, whole_candidates
from launchtune.kernels.space import Param, Space
from tests.autotune.test_tuner import FakeClock
from tests.conftest import REPO


class FakeSolver:
    """Steps cost ``cost(config)`` ms on a fake clock; configurations with ``x == 3`` cannot run here."""

    def __init__(self, cost):
        self.clock, self.cost, self.config, self.configs_used = FakeClock(), cost, None, []

        class Backend:
            def stopwatch(_self):
                return self.clock

        self.backend = Backend()

    def set_config(self, config):
        if config["x"] == 3:
            raise ValueError("x=3 exceeds the compiled variant's register limit")
        self.config = dict(config)

    def step(self, residuals=False):
        self.configs_used.append(self.config["x"])
        self.clock.now_ms += self.cost(self.config)


SPACE = Space([Param("x", (0, 1, 2, 3, 4, 5)), Param("y", (0, 1))], default={"x": 0, "y": 0})


def test_the_tuner_switches_whole_configurations_between_steps_and_locks_the_fastest():
    cands = [{"x": x, "y": 0} for x in (0, 1, 2, 3, 4)]
    solver = FakeSolver(lambda c: {0: 5.0, 1: 4.0, 2: 2.0, 4: 3.0}[c["x"]])
    whole = WholeTuner(solver, cands, samples=3, period_s=None, context={"default": {"x": 0, "y": 0}})
    for _ in range(1 + 3 * 4 + 5):  # warm-up, 3 samples of the 4 that run, then idle
        whole.step()
    assert whole.tuner.state == IDLE and solver.config == {"x": 2, "y": 0}
    # one configuration per step, each candidate's samples consecutive, x=3 refused and dropped
    assert solver.configs_used == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 4, 4, 4, 2, 2, 2, 2, 2]
    assert whole.rejected and whole.rejected[0]["config"] == {"x": 3, "y": 0}
    s = whole.summary()
    assert s["config"] == {"x": 2, "y": 0} and s["best_ms"] == 2.0 and s["default_scan_ms"] == 5.0
    assert s["tuned_at_step"] == 13 and s["candidates"] == 4
    whole.context.update(gpu_class="h100", size="64x32")
    entry = whole.table_entry()
    assert entry["source"] == "runtime" and entry["best"] == {"x": 2, "y": 0}
    assert [c["time_ms"] for c in entry["candidates"]] == [2.0, 3.0, 4.0, 5.0]


def _table(path, entries):
    path.write_text(json.dumps({"format": "launchtune-tuning-table", "version": 1, "entries": entries}))
    return path


def test_seeded_candidates_come_from_the_nearest_size_of_the_class_and_a_runtime_entry_locks(tmp_path):
    sweep = {
        "gpu_class": "h100",
        "size": "3328x1024",
        "source": "sweep",
        "best": {"x": 4, "y": 1},
        "candidates": [
            {"config": {"x": 4, "y": 1}, "ms": 1.0},
            {"config": {"x": 9, "y": 0}},
            {"config": {"x": 2, "y": 0}},
        ],
    }
    other = {**sweep, "gpu_class": "h200", "best": {"x": 5, "y": 1}, "candidates": []}
    per_kernel = {
        "gpu_class": "h100",
        "size": "64x32",
        "kernel": "k",
        "candidates": [{"blocks": 1, "threads": 32}],
    }
    path = _table(tmp_path / "t.json", [sweep, other, per_kernel])
    configs, source, size = table_configurations(path, "h100", "104x32")
    assert configs == [{"x": 4, "y": 1}, {"x": 9, "y": 0}, {"x": 2, "y": 0}] and source == "sweep"
    cands, note, restored = whole_candidates(SPACE, "seeded", path, "h100", "104x32")
    # the default first, then the table's valid configurations in its order; x=9 is not in this space
    assert cands == [{"x": 0, "y": 0}, {"x": 4, "y": 1}, {"x": 2, "y": 0}] and restored is None
    assert "1 invalid here" in note
    runtime = _table(tmp_path / "r.json", [{**sweep, "source": "runtime", "size": "104x32"}])
    cands, note, restored = whole_candidates(SPACE, "seeded", runtime, "h100", "104x32")
    assert restored == {"x": 4, "y": 1} and note.startswith("locked from runtime")
    with pytest.raises(TunerError, match="GPU class 'v100'"):
        whole_candidates(SPACE, "seeded", path, "v100", "104x32")
    with pytest.raises(TunerError, match="--tuning-table"):
        whole_candidates(SPACE, "seeded", None, "h100", "104x32")
    with pytest.raises(TableError, match="configuration 0"):
        table_configurations(_table(tmp_path / "b.json", [{**sweep, "best": {"x": "four"}}]), "h100", "1x1")
    scan, note, _ = whole_candidates(SPACE, "scan", None, "h100", "104x32", scan_count=5, seed=3)
    assert scan[0] == {"x": 0, "y": 0} and len(scan) == len({config_key(c) for c in scan}) >= 5
    assert scan == whole_candidates(SPACE, "scan", None, "h100", "104x32", scan_count=5, seed=3)[0]


RUN = [
    sys.executable,
    "-m",
    "launchtune.kernels.cfd",
    "run",
    "--case",
    "inlet",
    "--size",
    "104x32",
    "--backend",
    "numpy",
]


def test_cli_scans_the_fused_space_then_a_seeded_run_locks_to_its_table(tmp_path):
    def cfd(*args):
        return subprocess.run(
            [*RUN, "--no-plot", *args], cwd=REPO, capture_output=True, text=True, timeout=300
        )

    scan = cfd("--steps", "110", "--space", "fused", "--autotune", "scan", "--out", str(tmp_path / "scan"))
    assert scan.returncode == 0, scan.stderr
    tuned = json.loads((tmp_path / "scan" / "summary.json").read_text())["autotune"]
    assert tuned["space"] == "fused" and tuned["state"] == "idle" and tuned["tuned_at_step"] == 100
    table = tmp_path / "scan" / "tuning_table.json"
    seeded = cfd(
        "--steps", "3", "--space", "fused", "--autotune", "seeded", "--tuning-table", str(table),
        "--out", str(tmp_path / "seeded"),
    )  # fmt: skip
    assert seeded.returncode == 0, seeded.stderr
    again = json.loads((tmp_path / "seeded" / "summary.json").read_text())["autotune"]
    assert again["restored"] and again["config"] == tuned["config"] and again["nonoptimal_steps"] == 0
    off = cfd("--steps", "2", "--space", "fused", "--out", str(tmp_path / "off"))
    assert off.returncode == 2 and "--autotune scan or seeded" in off.stderr


def test_the_tuner_keeps_the_seven_kernels_arithmetic_unless_allowed(tmp_path):
    """tile.arith 1 (another rounding) never joins the candidates unless asked: drawn ones and a table's are
    set to 0 (the table's said so); a table that predates the parameter runs it at the default."""
    space = Space(
        (Param("x", (0, 1, 2)), Param("tile.arith", (0, 1))),
        {"x": 0, "tile.arith": 0},
    )
    cands, _, _ = whole_candidates(space, "scan", None, "h100", "104x32", scan_count=20, seed=3)
    assert {c["tile.arith"] for c in cands} == {0} and len(cands) == 3  # the three x values, all arith 0
    cands, _, _ = whole_candidates(space, "scan", None, "h100", "104x32", scan_count=20, seed=3, arith=True)
    assert {c["tile.arith"] for c in cands} == {0, 1}
    entry = {
        "gpu_class": "h100",
        "size": "104x32",
        "source": "sweep",
        "candidates": [{"config": {"x": 2, "tile.arith": 1}}, {"config": {"x": 1}}],
    }
    path = _table(tmp_path / "t.json", [entry])
    cands, note, _ = whole_candidates(space, "seeded", path, "h100", "104x32")
    assert cands == [{"x": 0, "tile.arith": 0}, {"x": 2, "tile.arith": 0}, {"x": 1, "tile.arith": 0}]
    assert "1 of another arithmetic" in note and "seven kernels'" in note
    cands, note, _ = whole_candidates(space, "seeded", path, "h100", "104x32", arith=True)
    assert {"x": 2, "tile.arith": 1} in cands and "another arithmetic" not in note
