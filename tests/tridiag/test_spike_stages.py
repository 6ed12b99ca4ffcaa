"""The SPIKE pipeline's one-stream stage times (the seed's seven, from its traced chain) and the stream
benchmark's ``--copies`` (CPU only: the solver is a stand-in that returns made-up traces)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from benchmarks.tridiag_streams import copies_of, parse_args
from launchtune.kernels.tridiag.system import TridiagError
from launchtune.kernels.tridiag.workload import STAGES, make_workload, spike_stage_times

# ms from the start: rows up at 3, reduced (stage-1 span) at 4.5, top solved at 5, first chunk back at 8.25
TRACE = {
    "total": 10.0,
    "stage1": 4.5,
    "stage2": 0.5,
    "stage3": 5.0,
    "at_uploaded": 3.0,
    "at_last_reduced": 4.5,
    "at_first_back": 8.25,
    "at_first_down": 9.9,
}


def test_spike_stage_times_split_the_total():
    st = spike_stage_times(TRACE)
    assert st == {
        "t1_h2d": 3.0,
        "t1_comp": 1.5,
        "t1_d2h": 0.0,
        "t2_host": 0.5,
        "t3_h2d": 0.0,
        "t3_comp": 3.25,
        "t3_d2h": 1.75,
        "total": 10.0,
    }
    assert sum(st[s] for s in STAGES) == pytest.approx(TRACE["total"])


def test_spike_stage_times_need_the_trace():
    seed_detail = {s: 1.0 for s in STAGES} | {"total": 7.0, "stage1": 3.0, "stage2": 1.0, "stage3": 3.0}
    with pytest.raises(TridiagError, match="'at_uploaded'.*trace"):
        spike_stage_times(seed_detail)  # solve(detail=True): the seed pipeline's, no chain
    with pytest.raises(TridiagError, match="'at_first_back'"):
        spike_stage_times({k: v for k, v in TRACE.items() if k != "at_first_back"})


class FakeSolver:
    """``CudaPartitionSolver.solve`` at one stream: the n-th call returns n x ``TRACE`` with ``trace`` on,
    else n x the seed's detail (every stage 1 ms)."""

    def __init__(self):
        self.trace = False
        self.calls: list[tuple[int, bool, bool]] = []

    def solve(self, streams: int, detail: bool = False) -> dict[str, float]:
        self.calls.append((streams, detail, self.trace))
        n = len(self.calls)
        if self.trace:
            return {k: n * v for k, v in TRACE.items()}
        return {s: float(n) for s in STAGES} | {"total": 7.0 * n}


@pytest.fixture
def on_fake_gpu(monkeypatch):
    work = make_workload("random", 1000, "numpy")
    solver = FakeSolver()
    monkeypatch.setattr(work, "backend", SimpleNamespace(is_gpu=True, name="fake"))
    monkeypatch.setattr(work, "gpu_solver", lambda *args, **kwargs: solver)
    return work, solver


def test_stage_times_of_spike_are_traced_medians(on_fake_gpu):
    work, solver = on_fake_gpu
    st = work.stage_times(256, 10, 3, "gpu", "spike")
    assert solver.calls == [(1, False, True)] * 4  # a warm-up, then 3 traced one-stream solves
    assert solver.trace is False  # left as found
    assert st == {k: 3 * v for k, v in spike_stage_times(TRACE).items()}  # the median of calls 2, 3, 4
    assert work.stage_times(256, 10, 3, "gpu", "spike") is st and len(solver.calls) == 4  # cached
    seed = work.stage_times(256, 10, 3, "gpu", "streams")  # same (threads, m, repeats, stage2): not cached
    assert solver.calls[4:] == [(1, True, False)] * 4
    assert seed["t1_d2h"] == 7.0 and seed["total"] == 49.0


def test_stage_times_of_spike_need_stage2_on_the_device(on_fake_gpu):
    work, solver = on_fake_gpu
    with pytest.raises(TridiagError, match="stage 2 on the device"):
        work.stage_times(256, 10, 3, "host", "spike")
    assert solver.calls == []


def test_benchmark_copies_option():
    assert parse_args(["--out", "x"]).copies == "streams"  # the seed's pipeline unless asked
    assert parse_args(["--out", "x", "--copies", "spike"]).copies == "spike"
    for bad in ("ordered", "streamed", "SPIKE"):
        with pytest.raises(SystemExit):
            parse_args(["--out", "x", "--copies", bad])
    assert copies_of("gpu", "spike") == "spike" and copies_of("host", "spike") == "streams"
    assert copies_of("gpu", "streams") == "streams"
