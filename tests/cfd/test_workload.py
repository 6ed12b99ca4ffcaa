"""The workload contract the pipeline relies on, and the launch hook the runtime autotuner uses (CPU)."""

from __future__ import annotations

import pytest

from launchtune.kernels.cfd.launch_space import PAPER_BLOCKS, PAPER_THREADS
from launchtune.kernels.cfd.physics import KERNEL_NAMES
from launchtune.kernels.cfd.workload import make_workload
from launchtune.kernels.space import SpaceError
from launchtune.kernels.workload import Check, Timing, Workload


@pytest.fixture(scope="module")
def wl():
    return make_workload("inlet", "52x16", "numpy")


def test_space_is_table3_with_a_one_thread_per_cell_default(wl):
    assert isinstance(wl, Workload)
    assert (wl.name, wl.case, wl.size) == ("cfd", "inlet", (52, 16))
    sp = wl.space()
    assert sp.names == [f"{k}.{p}" for k in KERNEL_NAMES for p in ("blocks", "threads")]
    for k in KERNEL_NAMES:
        assert sp[f"{k}.blocks"].values == PAPER_BLOCKS == tuple(range(100, 1001, 100))
        assert sp[f"{k}.threads"].values == PAPER_THREADS == tuple(range(32, 385, 32))
    assert sp.cardinality == 10**7 * 12**7
    sizes = wl.solver.domain_sizes()
    assert sizes["xi_flux"] == 53 * 16 and sizes["eta_limiter"] == 52 * 18
    for k in KERNEL_NAMES:
        assert sp.default[f"{k}.threads"] == 256
        assert sp.default[f"{k}.blocks"] * 256 >= sizes[k] > (sp.default[f"{k}.blocks"] - 1) * 256
    assert sp.is_valid(sp.default)


def test_wide_space_reaches_one_thread_per_cell():
    w = make_workload("freestream", "104x32", "numpy", space="wide")
    sp = w.space()
    assert max(sp["update.threads"].values) == 1024
    assert max(sp["update.blocks"].values) * 32 >= 106 * 32


def test_run_returns_per_kernel_and_total_times(wl):
    t = wl.run(wl.space().default, repeats=2)
    assert isinstance(t, Timing) and t.repeats == 2
    assert sorted(t.kernels) == sorted(KERNEL_NAMES)
    assert all(v > 0 for v in t.kernels.values())
    assert t.total >= 0.9 * sum(t.kernels.values())


def test_check_accepts_any_config_on_numpy(wl):
    for cfg in wl.space().sample(3, seed=4):
        assert wl.check(cfg) == Check(True)


def test_check_flags_a_different_result(wl):
    wl.check(wl.space().default)  # fills the cached reference
    wl._reference[0][1, 5, 5] += 1e-9  # what a racy kernel would do to one cell
    try:
        c = wl.check(wl.space().default)
        assert not c.ok and "differs" in c.reason
    finally:
        wl._reference = None


def test_bad_configuration_and_options_raise(wl):
    cfg = dict(wl.space().default)
    cfg["xi_flux.threads"] = 100
    with pytest.raises(SpaceError):
        wl.run(cfg, 1)
    with pytest.raises(ValueError, match="option"):
        make_workload("inlet", "52x16", "numpy", colour="red")
    with pytest.raises(ValueError, match="case"):
        make_workload("nozzle", "52x16", "numpy")
    with pytest.raises(ValueError, match="NXxNY"):
        make_workload("inlet", "52-16", "numpy")
    with pytest.raises(ValueError, match="preset"):
        make_workload("inlet", "52x16", "numpy", space="huge")


class FakeTuner:
    def __init__(self, param):
        self.param = param
        self.events = []

    def begin(self):
        self.events.append("begin")

    def end(self):
        self.events.append("end")


def test_every_launch_goes_through_the_tuner_hook():
    from launchtune.kernels.cfd.solver import Solver

    s = Solver("inlet", "52x16", "numpy")
    assert s.kernel_names == KERNEL_NAMES and s.size == (52, 16) and s.tuners == {}
    assert set(s.max_threads_per_block) == set(KERNEL_NAMES)
    seen = []
    impl = dict(s._impl)
    for name in KERNEL_NAMES:
        s._impl[name] = lambda b, t, *a, name=name: (seen.append((name, b, t)), impl[name](b, t, *a))
    s.tuners = {"xi_flux": FakeTuner((300, 64))}
    s.step()
    stages = s.scheme.stages
    assert s.tuners["xi_flux"].events == ["begin", "end"] * stages
    assert [x for x in seen if x[0] == "xi_flux"] == [("xi_flux", 300, 64)] * stages
    assert [x for x in seen if x[0] == "rhs"] == [("rhs", *s.launch["rhs"])] * stages
    assert len(seen) == 7 * stages
