"""attach_tuners (one ``Tuning`` per kernel), tuning_summary, save_tuning on a small stand-in solver; the
tuning table's files and the one reader of its picks (``table_seeds``)."""

from __future__ import annotations

import csv
import json

import pytest

from launchtune.kernels.autotune import (
    IDLE,
    STARTUP,
    TableError,
    TunerError,
    TuningTable,
    attach_tuners,
    save_tuning,
    tuning_summary,
)
from launchtune.kernels.backend import get_backend
from launchtune.kernels.space import Constraint, Param, Space
from launchtune.kernels.tuning_table import Entry, table_seeds
from tests.conftest import REPO

KERNELS = ("xi_flux", "rhs")


class FakeSolver:
    """The solver side of the contract, launching nothing: each 'launch' just reads the tuner's param."""

    def __init__(self, max_threads=None):
        self.kernel_names = KERNELS
        self.backend = get_backend("numpy")
        self.size = (32, 16)
        self.case = "inlet"
        self.tuners = {}
        self.max_threads_per_block = max_threads or {"xi_flux": 128, "rhs": 1024}
        self.launched: list[tuple[str, tuple[int, int]]] = []

    def space(self) -> Space:
        """The solver's launch space: each kernel's threads within its compiled limit (as ``build_space``)."""
        params, default, limits = [], {}, []
        for k in KERNELS:
            params += [Param(f"{k}.blocks", (100, 200, 300)), Param(f"{k}.threads", (64, 128, 256))]
            threads = min(256, self.max_threads_per_block[k])
            default |= {f"{k}.blocks": 2, f"{k}.threads": threads}  # one thread per cell: off the lists
            limit, key = self.max_threads_per_block[k], f"{k}.threads"
            limits.append(Constraint(f"{key} over {limit}", lambda c, key=key, limit=limit: c[key] <= limit))
        return Space(tuple(params), default, tuple(limits))

    def step(self) -> None:
        for _stage in range(2):  # two Runge-Kutta stages: each kernel runs twice a step
            for k in KERNELS:
                tuner = self.tuners.get(k)
                param = tuner.param if tuner else (2, min(256, self.max_threads_per_block[k]))
                if tuner:
                    tuner.begin()
                self.launched.append((k, param))
                if tuner:
                    tuner.end()


def test_scan_mode_tunes_every_kernel_within_limits_and_reports(tmp_path):
    solver = FakeSolver()
    tuners = attach_tuners(solver, "scan", samples=3, period_s=None)
    assert solver.tuners is tuners and sorted(tuners) == sorted(KERNELS)
    # default first, then the 3x3 grid; xi_flux's 256-thread candidates are over its limit of 128
    assert tuners["xi_flux"].candidates[:3] == [(2, 128), (100, 64), (100, 128)]
    assert len(tuners["xi_flux"].candidates) == 7 and all(t <= 128 for _, t in tuners["xi_flux"].candidates)
    assert tuners["rhs"].candidates[0] == (2, 256) and len(tuners["rhs"].candidates) == 10
    for _ in range(40):
        solver.step()
    assert all(t.state == IDLE for t in tuners.values())
    assert max(p[1] for k, p in solver.launched if k == "xi_flux") <= 128
    summary = tuning_summary(tuners)
    rhs = summary["kernels"]["rhs"]
    assert rhs["first_scan_launches"] == 1 + 10 * 3
    assert rhs["first_scan_steps"] == 16  # 31 launches at two a step: steps 1 to 16
    assert rhs["launches"] == 80 and summary["launches"] == 160
    assert 0 <= summary["nonoptimal_share"] <= 1 and summary["all_tuned_at_step"] == 16
    assert json.dumps(summary)  # summary.json-ready

    written = save_tuning(tuners, tmp_path)
    rows = list(csv.DictReader(open(written["launch_log"])))
    # every scan launch (xi_flux 1 + 7 x 3, rhs 1 + 10 x 3) and one idle launch in 100 (the first) of each
    assert len(rows) == (22 + 1) + (31 + 1)
    assert set(rows[0]) >= {"kernel", "step", "state", "blocks", "threads", "time_ms"}
    assert all(r["time_ms"] != "" for r in rows)
    assert {e.kernel for e in TuningTable.load(written["tuning_table"]).entries} == set(KERNELS)  # in bounds
    seeds = table_seeds(written["tuning_table"], "cpu", "32x16", {"rhs.blocks": 2, "rhs.threads": 256})
    assert seeds.source == "runtime" and seeds.configs[0] == {
        "rhs.blocks": rhs["blocks"],
        "rhs.threads": rhs["threads"],
    }


def test_seeded_from_a_runtime_table_locks_without_scanning(tmp_path):
    first = FakeSolver()
    attach_tuners(first, "scan", samples=1, period_s=None)
    for _ in range(20):
        first.step()
    path = save_tuning(first.tuners, tmp_path)["tuning_table"]
    picked = {k: t.param for k, t in first.tuners.items()}

    second = FakeSolver()
    tuners = attach_tuners(second, "seeded", path)
    assert all(t.state == IDLE for t in tuners.values())
    second.step()
    assert {k: p for k, p in second.launched} == picked
    assert tuning_summary(tuners)["kernels"]["rhs"]["nonoptimal_launches"] == 0


def test_seeded_from_a_sweep_table_scans_its_short_list(tmp_path):
    table = TuningTable(
        [
            Entry(
                "cpu",
                "64x16",
                "xi_flux",
                [
                    {"blocks": 300, "threads": 64},
                    {"blocks": 100, "threads": 256},
                    {"blocks": 100, "threads": 128},
                ],
            ),
            Entry("cpu", "32x16", "rhs", [{"blocks": 300, "threads": 64}]),
        ]
    )
    path = table.save(tmp_path / "t.json")
    tuners = attach_tuners(FakeSolver(), "seeded", path, samples=1)
    # nearest size of this class: the default, then the table's that can launch (256 threads is over
    # xi_flux's limit of 128), not the whole space
    assert tuners["xi_flux"].candidates == [(2, 128), (300, 64), (100, 128)]
    assert tuners["xi_flux"].state == STARTUP and "1 invalid here" in tuners["xi_flux"].seed
    assert tuners["rhs"].candidates == [(2, 256), (300, 64)]
    solver = FakeSolver(max_threads={"xi_flux": 128, "rhs": 1024})
    solver.kernel_names = ("xi_flux", "rhs", "source")
    solver.space = lambda: _with_source(FakeSolver.space(solver))
    tuners = attach_tuners(solver, "seeded", path, samples=1)
    assert len(tuners["source"].candidates) == 10 and tuners["source"].seed.startswith("none: ")  # full scan


def _with_source(space: Space) -> Space:
    params = (*space.params, Param("source.blocks", (100, 200, 300)), Param("source.threads", (64, 128, 256)))
    return Space(params, {**space.default, "source.blocks": 2, "source.threads": 256}, space.constraints)


def test_off_mode_attaches_nothing_and_bad_modes_are_named():
    solver = FakeSolver()
    assert attach_tuners(solver, "off") == {} and solver.tuners == {}
    with pytest.raises(TunerError, match="--autotune must be one of"):
        attach_tuners(solver, "fast")
    with pytest.raises(TunerError, match="--tuning-table"):
        attach_tuners(solver, "seeded")


def test_table_seeds_reads_a_sweep_report_entry_per_kernel_rankings_first(tmp_path):
    # the shape pipeline/report.py writes: best, candidates of whole configurations, per_kernel rankings
    best = {"xi_flux.blocks": 400, "xi_flux.threads": 128, "rhs.blocks": 100, "rhs.threads": 64}
    doc = {
        "format": "launchtune.tuning_table/1",
        "entries": [
            {
                "gpu_class": "h100",
                "workload": "cfd",
                "size": "3328x1024",
                "best": best,
                "best_ms": 1.0,
                "default": {"xi_flux.blocks": 13312, "xi_flux.threads": 256},
                "candidates": [
                    {"config": best, "ms": 1.0, "source": "remeasured"},
                    {"config": {**best, "xi_flux.blocks": 500}, "ms": 1.1, "source": "sampled"},
                ],
                "per_kernel": {"rhs": [{"rhs.blocks": 900, "rhs.threads": 32, "ms": 0.1}]},
            }
        ],
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))

    def seeds(kernel, gpu_class="h100", size="3328x1024", path=path):
        default = {f"{kernel}.blocks": 1, f"{kernel}.threads": 1}
        return table_seeds(path, gpu_class, size, default)

    def pairs(found):
        return [tuple(c.values()) for c in found.configs]

    assert pairs(seeds("xi_flux")) == [(400, 128), (500, 128)]
    assert pairs(seeds("rhs")) == [(900, 32), (100, 64)]
    assert seeds("rhs").source == "sweep"  # scanned, never locked
    assert seeds("rhs", size=(208, 64)).size == "3328x1024"  # nearest size of the class
    assert seeds("rhs", gpu_class="a100").configs == [] and seeds("rhs", gpu_class="a100").where.startswith(
        "none"
    )
    table = TuningTable.load(path)  # the per-kernel view keeps the same ranking, and saves it
    again = TuningTable.load(table.save(tmp_path / "again.json"))
    assert next(e for e in again.entries if e.kernel == "rhs").params == [(900, 32), (100, 64)]
    assert pairs(seeds("rhs", path=tmp_path / "again.json")) == [(900, 32), (100, 64)]


@pytest.mark.parametrize(
    "text, match",
    [
        ("{", "not a readable JSON"),
        ('{"rows": []}', "'entries'"),
        (
            '{"entries": [{"size": "1x1", "kernel": "k", "candidates": []}]}',
            "entries\\[0\\]: field 'gpu_class'",
        ),
        (
            '{"entries": [{"gpu_class": "h100", "size": "1x1", "kernel": "k", "candidates": []}]}',
            "candidates",
        ),
        (
            '{"entries": [{"gpu_class": "h100", "size": "1x1", "kernel": "k", '
            '"candidates": [{"blocks": 1}]}]}',
            "threads",
        ),
        (
            '{"entries": [{"gpu_class": "h100", "size": "1x1", "configs": [{"a": 1}]}]}',
            "needs 'kernel' with 'candidates'",
        ),
    ],
)
def test_bad_tables_name_the_file_and_field(tmp_path, text, match):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(TableError, match=match) as err:
        TuningTable.load(path)
    assert str(path) in str(err.value)


def test_missing_table_is_a_clear_error(tmp_path):
    with pytest.raises(TableError, match="not found"):
        TuningTable.load(tmp_path / "nope.json")


def test_seeded_from_the_committed_h100_sweep_report(monkeypatch):
    """The table the pipeline's report wrote for the real H100 sweep seeds a short scan on an H100."""
    from launchtune.kernels.autotune import attach

    path = REPO / "data" / "cfd" / "h100" / "sweep_paper" / "tuning_table.json"
    table = TuningTable.load(path)
    assert {e.kernel for e in table.entries} >= set(KERNELS)
    monkeypatch.setattr(
        attach, "describe_device", lambda backend: {"gpu_class": "h100", "device_name": "H100"}
    )
    solver = FakeSolver(max_threads={"xi_flux": 768, "rhs": 1024})
    solver.size = (3328, 1024)
    solver.space = lambda: _paper_space(solver)
    tuners = attach_tuners(solver, "seeded", path, samples=1)
    for k in KERNELS:
        # the same ranking as the table's per-kernel view, per_kernel rankings first
        entry = next(e for e in table.entries if e.kernel == k and e.size == "3328x1024")
        seeds = table_seeds(path, "h100", (3328, 1024), {f"{k}.blocks": 1, f"{k}.threads": 1}).configs
        assert [(c[f"{k}.blocks"], c[f"{k}.threads"]) for c in seeds] == entry.params
        default = (PAPER_DEFAULT[k], 256)
        valid = [(b, t) for b, t in entry.params if (100 <= b <= 1000 or b == default[0]) and t <= 384]
        assert valid == entry.params and tuners[k].candidates == list(dict.fromkeys([default, *valid[:8]]))
        assert tuners[k].seed.startswith("sweep h100 3328x1024")


PAPER_DEFAULT = {"xi_flux": -(-3329 * 1024 // 256), "rhs": 3328 * 1024 // 256}  # one thread per face, cell


def _paper_space(solver: FakeSolver) -> Space:
    """FakeSolver's space with the paper's value lists (Table 3 of Xue & Roy), as the real solver's."""
    params = []
    for k in KERNELS:
        params += [
            Param(f"{k}.blocks", tuple(range(100, 1001, 100))),
            Param(f"{k}.threads", tuple(range(32, 385, 32))),
        ]
    default = {f"{k}.{p}": v for k in KERNELS for p, v in (("blocks", PAPER_DEFAULT[k]), ("threads", 256))}
    return Space(tuple(params), default, FakeSolver.space(solver).constraints)
