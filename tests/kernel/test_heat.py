"""The shipped stencil with temporal tiling (kernels/examples/heat.*): its tiling algorithm, emulated in numpy
block by block as heat.cu runs it, against the plain numpy steps on random grids and configurations (CPU);
the CUDA kernel itself against numpy on random configurations, and its objective per step (GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from launchtune.kernels.examples.heat import advance, reference
from launchtune.kernels.kernel.spec import load_kernel_spec
from tests.conftest import REPO

HEAT = REPO / "kernels" / "examples" / "heat.yaml"


def tiled(u: np.ndarray, c: dict[str, int], alpha: float) -> np.ndarray:
    """heat.cu's algorithm, one block at a time: load the tile and a halo ``steps`` wide (zeros off the
    grid), advance the region with the same shrinking bounds and interior test, write the tile."""
    ny, nx = u.shape
    steps = c["steps_per_launch"]
    tw, th = c["block_size_x"] * c["tile_x"], c["block_size_y"] * c["tile_y"]
    w, h = tw + 2 * steps, th + 2 * steps
    out = np.zeros_like(u)
    a32 = np.float32(alpha)
    for by in range(-(-ny // th)):
        for bx in range(-(-nx // tw)):
            x0, y0 = bx * tw - steps, by * th - steps
            gy, gx = np.mgrid[y0 : y0 + h, x0 : x0 + w]
            inside = (gx >= 0) & (gx < nx) & (gy >= 0) & (gy < ny)
            a = np.where(inside, u[np.clip(gy, 0, ny - 1), np.clip(gx, 0, nx - 1)], 0).astype(np.float32)
            interior = (gx > 0) & (gx < nx - 1) & (gy > 0) & (gy < ny - 1)
            for s in range(1, steps + 1):
                b = a.copy()
                core = (slice(s, h - s), slice(s, w - s))
                c0 = a[core]
                nb = a[s : h - s, s - 1 : w - s - 1] + a[s : h - s, s + 1 : w - s + 1]
                nb = nb + a[s - 1 : h - s - 1, s : w - s] + a[s + 1 : h - s + 1, s : w - s]
                b[core] = np.where(interior[core], c0 + a32 * (nb - np.float32(4) * c0), c0)
                a = b
            ys, xs = slice(steps, h - steps), slice(steps, w - steps)
            keep = (gy[ys, xs] < ny) & (gx[ys, xs] < nx)
            out[gy[ys, xs][keep], gx[ys, xs][keep]] = a[ys, xs][keep]
    return out


def test_temporal_tiling_computes_the_plain_steps_on_random_grids_and_configurations():
    spec = load_kernel_spec(HEAT)
    rng = np.random.default_rng(3)
    for trial in range(12):
        ny, nx = (int(v) for v in rng.integers(5, 90, size=2))
        space = spec.space((nx, ny, 1))
        config = spec.actual(space.sample(1, seed=trial)[0])
        u = rng.uniform(0, 1, size=(ny, nx)).astype(np.float32)
        want = advance(u, config["steps_per_launch"], 0.2)
        np.testing.assert_allclose(tiled(u, config, 0.2), want, rtol=1e-6, atol=1e-6, err_msg=str(config))


def test_the_reference_advances_the_configurations_steps_and_holds_the_edge():
    rng = np.random.default_rng(0)
    u = rng.uniform(0, 1, size=(7, 9)).astype(np.float32)
    args = [np.zeros_like(u), u, 9, 7, np.float32(0.2)]
    two = reference(args, (9, 7, 1), {"steps_per_launch": 2})[0]
    np.testing.assert_array_equal(two, advance(advance(u, 1, 0.2), 1, 0.2))
    assert not np.array_equal(two, reference(args, (9, 7, 1), {"steps_per_launch": 3})[0])
    edge = np.ones_like(u, dtype=bool)
    edge[1:-1, 1:-1] = False
    np.testing.assert_array_equal(two[edge], u[edge])
    flat = np.full((6, 6), 0.5, np.float32)  # a uniform field stays uniform
    np.testing.assert_allclose(advance(flat, 16, 0.2), flat, atol=1e-7)


def test_the_spec_minimises_time_per_step():
    spec = load_kernel_spec(HEAT)
    assert spec.objective.describe() == "minimize ms_per_step"
    config = {**spec.default, "steps_per_launch": 4}
    metrics, cost = spec.evaluate(config, (4096, 4096, 1), {"time": 0.4})
    assert cost == pytest.approx(0.1) and metrics["gcells_per_s"] == pytest.approx(4096**2 * 4 / 0.4e6)
    assert spec.shared_bytes(config, (4096, 4096, 1)) == 2 * (32 + 8) * (4 + 8) * 4


@pytest.mark.gpu
def test_the_kernel_matches_numpy_on_random_configurations():
    from launchtune.kernels.kernel.workload import make_workload

    w = make_workload("heat", "300x200", "cupy", spec=str(HEAT), seed=4, compile_workers=4)
    space = w.space()
    configs = [space.default, *space.sample(12, seed=7)]
    w.compile_ahead(configs)
    _, u, nx, ny, alpha = w._host
    for config in configs:
        compiled = w.compiled(config)
        assert not w._problems(config, compiled), config
        got = w.cp.asnumpy(w._outputs_after_one_launch(config, compiled)[0])
        want = advance(u, config["steps_per_launch"], float(alpha))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=str(config))
        assert w.check(config).ok, config
        timing = w.run(config, repeats=3)
        assert timing.extra["objective"] == pytest.approx(timing.total / config["steps_per_launch"])
