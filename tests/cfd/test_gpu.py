"""CuPy against the numpy reference; bitwise agreement across launch configurations (on the lent GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from launchtune.kernels.cfd.physics import KERNEL_NAMES
from launchtune.kernels.cfd.solver import Solver

pytestmark = pytest.mark.gpu

SIZE = (208, 64)
STEPS = 3
N_RANDOM = 20


def _state(solver):
    return solver.backend.asnumpy(solver.V[:, 2:-2, 2:-2]), solver.backend.asnumpy(solver.U0)


def _run(solver, config, poison=True):
    solver.reset()
    solver.set_config(config)
    if poison:  # every scratch array must be fully rewritten by the kernels
        for a in (
            solver.xip,
            solver.xim,
            solver.etp,
            solver.etm,
            solver.F,
            solver.G,
            solver.S,
            solver.R,
            solver.dt,
        ):
            a.fill(np.nan)
    for _ in range(STEPS):
        solver.step()
    return _state(solver)


@pytest.mark.parametrize("case", ["inlet", "mms"])
def test_cupy_equals_numpy_and_every_config_is_bitwise_the_default(case):
    ref = Solver(case, SIZE, "numpy", perturb=0.01, seed=7)
    for _ in range(STEPS):
        ref.step()
    want_v, want_u = _state(ref)
    gpu = Solver(case, SIZE, "cupy", perturb=0.01, seed=7)
    space = gpu.space("paper")
    configs = [space.default, *space.sample(N_RANDOM, seed=11)]
    base_v, base_u = _run(gpu, configs[0])
    assert np.isfinite(base_v).all()
    for got, want in ((base_v, want_v), (base_u, want_u)):
        for q in range(4):
            scale = np.abs(want[q]).max()
            assert np.abs(got[q] - want[q]).max() <= 1e-12 * scale, (case, q)
    for cfg in configs[1:]:
        v, u = _run(gpu, cfg)
        assert np.array_equal(v, base_v) and np.array_equal(u, base_u), cfg


def test_wide_space_configs_and_workload_check_agree():
    from launchtune.kernels.cfd.workload import make_workload

    w = make_workload("inlet", SIZE, "cupy", space="wide")
    sp = w.space()
    for cfg in [sp.default, *sp.sample(8, seed=5)]:
        assert w.check(cfg).ok, cfg
    t = w.run(sp.default, repeats=3)
    assert sorted(t.kernels) == sorted(KERNEL_NAMES) and t.total > 0


def test_space_respects_the_compiled_kernels_limits():
    s = Solver("inlet", SIZE, "cupy")
    for name, attrs in s.kernel_attributes.items():
        assert 0 < attrs["max_threads_per_block"] <= 1024 and attrs["num_regs"] > 0
        wide = s.space("wide")
        too_many = [t for t in wide[f"{name}.threads"].values if t > attrs["max_threads_per_block"]]
        if too_many:
            cfg = dict(wide.default)
            cfg[f"{name}.threads"] = too_many[0]
            assert not wide.is_valid(cfg)
