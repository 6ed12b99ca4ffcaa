"""Run-time tuning of whole configurations (the fused CFD space, issue 16): a fake solver whose steps cost
what the test says, a ``Tuning`` over a whole space (its table picks, a runtime entry locked, the arithmetic
pinned), and the CLI on the numpy backend."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from launchtune.kernels.autotune import IDLE, TableError, TunerError, Tuning
from launchtune.kernels.autotune.whole import WholeTuner, attach_whole_tuner
from launchtune.kernels.space import Param, Space
from launchtune.kernels.tuning_table import table_seeds
from tests.autotune.test_tuner import FakeClock
from tests.conftest import REPO


class FakeSolver:
    """Steps cost ``cost(config)`` ms on a fake clock; configurations with ``x == 3`` cannot run here."""

    def __init__(self, cost):
        self.clock, self.cost, self.config, self.configs_used = FakeClock(), cost, None, []
        self.steps_done = 0

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
        self.steps_done += 1


SPACE = Space([Param("x", (0, 1, 2, 3, 4, 5)), Param("y", (0, 1))], default={"x": 0, "y": 0})


def _tuning(space, table=None, **kw):
    kw.setdefault("scan", None)
    return Tuning("step", space, gpu_class="h100", size="104x32", table=table, default_first=True, **kw)


def test_the_tuner_switches_whole_configurations_between_steps_and_locks_the_fastest():
    solver = FakeSolver(lambda c: {0: 5.0, 1: 4.0, 2: 2.0, 4: 3.0}[c["x"]])
    space = Space([Param("x", (0, 1, 2, 3, 4)), Param("y", (0,))], default={"x": 0, "y": 0})
    tuning = _tuning(space, clock=solver.clock, step=lambda: solver.steps_done, samples=3, period_s=None)
    assert tuning.candidates == [(x, 0) for x in (0, 1, 2, 3, 4)]  # the default first, then the space's
    whole = WholeTuner(solver, tuning)
    for _ in range(1 + 3 * 4 + 5):  # warm-up, 3 samples of the 4 that run, then idle
        whole.step()
    assert whole.tuner.state == IDLE and solver.config == {"x": 2, "y": 0}
    # one configuration per step, each candidate's samples consecutive, x=3 refused and dropped
    assert solver.configs_used == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 4, 4, 4, 2, 2, 2, 2, 2]
    assert tuning.rejected and tuning.rejected[0]["config"] == {"x": 3, "y": 0}
    s = whole.summary()
    assert s["config"] == {"x": 2, "y": 0} and s["best_ms"] == 2.0 and s["default_scan_ms"] == 5.0
    assert s["tuned_at_step"] == 13 and s["candidates"] == 4
    entry = whole.table_entry()
    assert entry["source"] == "runtime" and entry["best"] == {"x": 2, "y": 0} and entry["size"] == "104x32"
    assert [c["time_ms"] for c in entry["candidates"]] == [2.0, 3.0, 4.0, 5.0]
    assert entry["space"] == "fused" and s["rejected"][0]["reason"].startswith("x=3 exceeds")


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
    seeds = table_seeds(path, "h100", "104x32", SPACE.default)
    assert seeds.configs == [{"x": 4, "y": 1}, {"x": 9, "y": 0}, {"x": 2, "y": 0}] and seeds.source == "sweep"
    tuning = _tuning(SPACE, path)
    # the default first, then the table's valid configurations in its order; x=9 is not in this space
    assert tuning.candidates == [(0, 0), (4, 1), (2, 0)] and tuning.state != IDLE
    assert "1 invalid here" in tuning.seed
    runtime = _table(tmp_path / "r.json", [{**sweep, "source": "runtime", "size": "104x32"}])
    tuning = _tuning(SPACE, runtime)
    assert tuning.state == IDLE and tuning.config == {"x": 4, "y": 1}
    assert tuning.seed.startswith("locked from runtime")
    elsewhere = _table(tmp_path / "e.json", [{**sweep, "source": "runtime"}])  # another size: scanned
    assert _tuning(SPACE, elsewhere).state != IDLE
    assert not Tuning("step", SPACE, gpu_class="v100", size="104x32", table=path).seeded
    with pytest.raises(
        TableError, match=r"b.json: entries\[0\].best\['x'\]: must be an integer"
    ):  # its schema
        table_seeds(
            _table(tmp_path / "b.json", [{**sweep, "best": {"x": "four"}}]), "h100", "1x1", SPACE.default
        )
    with pytest.raises(TableError, match=r"c.json: entry h100 3328x1024: configuration \d+ is not"):
        table_seeds(
            _table(tmp_path / "c.json", [{**sweep, "best": None, "configs": [{"x": "four"}]}]),
            "h100",
            "1x1",
            SPACE.default,
        )
    scan = _tuning(SPACE, scan=5, seed=3)
    assert scan.candidates[0] == (0, 0) and len(set(scan.candidates)) == len(scan.candidates) == 5
    assert scan.candidates == _tuning(SPACE, scan=5, seed=3).candidates


class NumpyFused:
    """What ``attach_whole_tuner`` reads of a solver: a fused space, its size and backend."""

    def __init__(self, space):
        from launchtune.kernels.backend import get_backend

        self.fused, self.size, self.backend, self.steps_done = space, (104, 32), get_backend("numpy"), 0

    def space(self, preset):
        return self.fused

    @staticmethod
    def compile_ms_total():
        return 0.0


def test_attach_whole_tuner_refuses_a_table_without_this_class_and_seeded_without_a_table(tmp_path):
    sweep = {"gpu_class": "a100", "size": "104x32", "best": {"x": 4, "y": 1}}
    path = _table(tmp_path / "t.json", [sweep])
    with pytest.raises(TunerError, match="GPU class 'cpu'"):
        attach_whole_tuner(NumpyFused(SPACE), "seeded", path)
    with pytest.raises(TunerError, match="--tuning-table"):
        attach_whole_tuner(NumpyFused(SPACE), "seeded", None)
    whole = attach_whole_tuner(NumpyFused(SPACE), "scan", scan_count=4)
    assert len(whole.tuner.candidates) == 5 and whole.tuner.candidates[0] == (0, 0)  # the default and 4


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
    pin = {"tile.arith": 0}
    cands = _tuning(space, scan=20, seed=3, pinned=pin).candidates
    assert {a for _, a in cands} == {0} and len(cands) == 3  # the three x values, all arith 0
    assert {a for _, a in _tuning(space, scan=20, seed=3).candidates} == {0, 1}
    entry = {
        "gpu_class": "h100",
        "size": "104x32",
        "source": "sweep",
        "candidates": [{"config": {"x": 2, "tile.arith": 1}}, {"config": {"x": 1}}],
    }
    path = _table(tmp_path / "t.json", [entry])
    tuning = _tuning(space, path, pinned=pin)
    assert tuning.candidates == [(0, 0), (2, 0), (1, 0)]
    assert "1 run with tile.arith=0 instead of the table's" in tuning.seed
    tuning = _tuning(space, path)
    assert (2, 1) in tuning.candidates and "instead of the table's" not in tuning.seed
