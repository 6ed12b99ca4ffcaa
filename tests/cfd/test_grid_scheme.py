"""Grid geometry (Table 1), metrics, and the scheme's basic invariants on the CPU backend."""

from __future__ import annotations

import numpy as np
import pytest

from launchtune.kernels.cfd import grid as g
from launchtune.kernels.cfd import reference as ref
from launchtune.kernels.cfd.physics import GAMMA, freestream, oblique_shock
from launchtune.kernels.cfd.solver import Scheme, Solver, parse_size


@pytest.mark.parametrize("size", [(52, 16), (208, 64)])
def test_inlet_grid_follows_table1(size):
    nx, ny = size
    v = g.inlet_vertices(nx, ny)
    bottom, top = v[0], v[-1]
    tan30 = np.tan(np.radians(30))
    # eta_min: the ramp y = x tan 30 up to y = 0.2, then the floor
    assert np.allclose(bottom[:, 1], np.minimum(bottom[:, 0] * tan30, 0.2), atol=1e-12)
    assert bottom[0] == pytest.approx([0.0, 0.0]) and bottom[-1] == pytest.approx([1.5, 0.2])
    # eta_max: the inflow polynomial below y = 0.6, the cowl y = 0.6 after
    curve = top[top[:, 1] < 0.6 - 1e-9]
    assert np.allclose(curve[:, 0], g.inflow_curve_x(curve[:, 1]), atol=2e-5)  # chords of the dense polyline
    assert top[0] == pytest.approx([-0.05, 0.0]) and top[-1] == pytest.approx([1.5, 0.6])
    # xi_max at x = 1.5 from 0.2 to 0.6; xi_min on y = 0
    assert np.allclose(v[:, -1, 0], 1.5) and np.allclose(v[:, 0, 1], 0.0)


def test_cells_are_closed_and_positive():
    m = g.metrics(g.inlet_vertices(104, 32, smoothing=20))
    assert (m.vol > 0).all()
    # The face vectors of every cell sum to zero (what makes a uniform flow an exact discrete solution).
    cx = m.sxx[:, 1:] - m.sxx[:, :-1] + m.sex[1:, :] - m.sex[:-1, :]
    cy = m.sxy[:, 1:] - m.sxy[:, :-1] + m.sey[1:, :] - m.sey[:-1, :]
    assert np.abs(cx).max() < 1e-15 and np.abs(cy).max() < 1e-15
    # The areas add up to the polygon's area (shoelace formula over the boundary).
    v = m.vertices
    ring = np.concatenate([v[0, :], v[1:, -1], v[-1, -2::-1], v[-2:0:-1, 0]])
    x, y = ring[:, 0], ring[:, 1]
    area = 0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
    assert m.vol.sum() == pytest.approx(area, rel=1e-12)


def test_hllc_is_consistent_and_upwind():
    rng = np.random.default_rng(3)
    n = 50
    w = np.stack(
        [
            rng.uniform(0.1, 2, n),
            rng.uniform(-900, 900, n),
            rng.uniform(-900, 900, n),
            rng.uniform(1e4, 2e5, n),
        ]
    )
    sx, sy = rng.normal(size=n), rng.normal(size=n)

    def exact(w):
        r, u, v, p = w
        vs = u * sx + v * sy
        return np.stack(
            [
                r * vs,
                r * u * vs + sx * p,
                r * v * vs + sy * p,
                (GAMMA / (GAMMA - 1) * p + 0.5 * r * (u * u + v * v)) * vs,
            ]
        )

    out = np.zeros((4, n))
    ref.hllc(w, w, sx, sy, out)
    assert np.allclose(out, exact(w), rtol=1e-12, atol=1e-9)
    # Supersonic flow along the face normal: the flux is the upwind state's, whatever the downwind state.
    a = np.hypot(sx, sy)
    sup = w.copy()
    sup[1], sup[2] = 5000 * sx / a, 5000 * sy / a
    other = np.stack([sup[0] * 1.3, sup[1] * 0.9, sup[2] * 0.9, sup[3] * 1.5])
    ref.hllc(sup, other, sx, sy, out)
    assert np.allclose(out, exact(sup), rtol=1e-12)


def test_freestream_is_preserved_on_the_curved_grid():
    s = Solver("freestream", "104x32", "numpy", scheme=Scheme(cfl=1.0))
    for _ in range(60):
        s.step()
    w = s.primitives()
    r, u, v, p = freestream()
    assert np.abs(w[0] / r - 1).max() < 1e-12
    assert np.abs(w[1] / u - 1).max() < 1e-12
    assert np.abs(w[2] / u).max() < 1e-12
    assert np.abs(w[3] / p - 1).max() < 1e-12


def test_inlet_converges_and_matches_oblique_shock_theory():
    from launchtune.kernels.cfd.mms import converge
    from launchtune.kernels.cfd.physics import P_INF, mach

    s = Solver("inlet", "104x32", "numpy")
    info = converge(s, max_steps=2000, drop=3.0, every=25)
    assert info["orders"] >= 3.0, info
    w = s.primitives()
    xc = s.setup.metrics.xc.T
    theory = oblique_shock(4.0, 30.0)
    assert theory["beta_deg"] == pytest.approx(45.2, abs=0.1)
    on_ramp = (xc[:, 1] > 0.1) & (xc[:, 1] < 0.3)  # second cell row, between the tip and the shoulder
    p_ratio = w[3][on_ramp, 1] / P_INF
    angle = np.degrees(np.arctan2(w[2][on_ramp, 1], w[1][on_ramp, 1]))
    m2 = mach(w)[on_ramp, 1]
    assert np.abs(p_ratio / theory["p_ratio"] - 1).max() < 0.02
    assert np.abs(angle - 30.0).max() < 1.0
    assert np.abs(m2 / theory["mach2"] - 1).max() < 0.06


@pytest.mark.parametrize("bad", ["208", "axb", "2x64", "0x0", (3,), "208x64x2"])
def test_bad_sizes_raise(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_scheme_rejects_nonsense():
    with pytest.raises(ValueError, match="limiter"):
        Scheme(limiter="superbee2")
    with pytest.raises(ValueError, match="kappa"):
        Scheme(kappa=2.0)
