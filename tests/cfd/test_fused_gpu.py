"""Fused levels against the seven kernels on the GPU (issue 16): random tiles, 100 steps, MMS order."""

from __future__ import annotations

import numpy as np
import pytest

from launchtune.kernels.cfd.solver import Solver

pytestmark = pytest.mark.gpu

SIZE = (208, 64)
STEPS = 100
N_RANDOM = 12
SMALL_GRID_TOL = 1e-7  # tile.arith 1 against the seven kernels at SIZE after STEPS (see the test)


def _after(solver, config, steps):
    solver.reset()
    solver.set_config(config)
    for a in (solver.F, solver.G, solver.R, solver.dt):  # scratch arrays must be fully rewritten
        a.fill(np.nan)
    for _ in range(steps):
        solver.step()
    return solver.backend.asnumpy(solver.V[:, 2:-2, 2:-2]), solver.backend.asnumpy(solver.U0)


@pytest.mark.parametrize("case", ["inlet", "mms"])
def test_random_fused_configurations_agree_with_the_seven_kernel_step(case):
    """Bitwise where the arithmetic is the seven kernels' (tile.arith 0). Where it is not (tile.arith 1), not
    bitwise (or the variant would not be what it says) and close: on this small grid the transient from the
    perturbed start amplifies the other rounding to about 2e-9 after 100 steps (measured on the H100,
    2026-11-25), so the bound here is SMALL_GRID_TOL, far below any error of the scheme; the issue's 1e-12 at
    its 3328x1024 inlet is the next test's."""
    pytest.importorskip("cupy")
    from launchtune.kernels.cfd.workload import relative_difference

    s = Solver(case, SIZE, "cupy", perturb=0.01, seed=7)
    sp = s.space("fused")
    want_v, want_u = _after(s, sp.default, STEPS)
    assert np.isfinite(want_v).all()
    draws = [c for c in sp.sample(300, seed=21) if c["fusion"] != 0]
    configs = [
        c
        for lvl in (1, 2)
        for arith in (0, 1)
        for c in [d for d in draws if d["fusion"] == lvl and d["tile.arith"] == arith][: N_RANDOM // 4]
    ]
    configs.append({**sp.default, "fusion": 2})  # the default tile, smem and faces in shared memory
    march = [d for d in draws if d["fusion"] == 2 and d["tile.faces"] == 2][:3]
    configs += march + [{**sp.default, "fusion": 2, "tile.faces": 2, "tile.cells_y": 8, "tile.smem": 0}]
    configs.append({**sp.default, "fusion": 2, "tile.faces": 1, "tile.maxreg": 64, "tile.arith": 1})
    ran = 0
    for cfg in configs:
        try:
            v, u = _after(s, cfg, STEPS)
        except ValueError as e:  # over the compiled variant's register limit: invalid, with a reason
            assert "compiled variant" in str(e)
            continue
        ran += 1
        if cfg["tile.arith"]:
            worst = max(relative_difference(np, v, want_v), relative_difference(np, u, want_u))
            assert 0 < worst <= SMALL_GRID_TOL, (cfg, worst)
        else:
            assert np.array_equal(v, want_v) and np.array_equal(u, want_u), cfg
    assert ran >= len(configs) - 4


def test_other_arithmetic_agrees_to_1e_12_on_the_issues_inlet():
    """tile.arith 1 within the issue's 1e-12 of the seven kernels' state after 100 steps, in every variable,
    on the 3328x1024 inlet the issue names: the sweeps' best tile and three drawn fused ones."""
    pytest.importorskip("cupy")
    from launchtune.kernels.cfd.workload import ARITH_TOL, relative_difference

    s = Solver("inlet", (3328, 1024), "cupy")
    sp = s.space("fused")
    want_v, want_u = _after(s, sp.default, STEPS)
    best = {"fusion": 2, "tile.block_x": 256, "tile.block_y": 2, "tile.cells_y": 2, "tile.smem": 0}
    configs = [{**sp.default, **best, "tile.faces": 1, "tile.maxreg": 64, "tile.arith": 1}]
    configs += [c for c in sp.sample(60, seed=5) if c["fusion"] != 0 and c["tile.arith"] == 1][:3]
    for cfg in configs:
        v, u = _after(s, cfg, STEPS)
        worst = max(relative_difference(np, v, want_v), relative_difference(np, u, want_u))
        assert 0 < worst <= ARITH_TOL, (cfg, worst)


@pytest.mark.parametrize("faces,arith", [(1, 0), (2, 0), (1, 1)])
def test_fused_mms_observed_order(faces, arith):
    pytest.importorskip("cupy")
    from launchtune.kernels.cfd.mms import run_mms
    from launchtune.kernels.cfd.solver import Scheme

    cfg = {"fusion": 2, "tile.block_x": 32, "tile.block_y": 4, "tile.smem": 1, "tile.faces": faces}
    cfg["tile.arith"] = arith
    out = run_mms([32, 64, 128], backend="cupy", scheme=Scheme(limiter="van_albada"), drop=10.0, config=cfg)
    print("fused mms", faces, arith, out["l2_rho"], out["order_rho"])
    assert min(out["order_rho"]) >= 1.9, out["order_rho"]
