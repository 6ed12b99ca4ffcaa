"""Gas model, free-stream state and the manufactured solution; plain numpy, shared by both backends.

Ideal gas, gamma = 1.4, R = 287 J/(kg K). The inlet free stream is the seed's: Mach 4, 12270 Pa, 217 K.
The manufactured solution is the 2D supersonic Euler case of Roy, Nelson, Smith & Ober (2004),
"Verification of
Euler/Navier-Stokes codes using the method of manufactured solutions", Int. J. Numer. Meth. Fluids 44:599-620:
each primitive variable is a constant plus one sine/cosine wave in x and one in y on the unit square.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

GAMMA = 1.4
GAS_R = 287.0
MACH_INF = 4.0
P_INF = 12270.0
T_INF = 217.0

KERNEL_NAMES = ("xi_limiter", "eta_limiter", "xi_flux", "eta_flux", "source", "rhs", "update")
LIMITERS = {"none": 0, "minmod": 1, "van_leer": 2, "van_albada": 3}


def freestream() -> tuple[float, float, float, float]:
    """(rho, u, v, p) of the inlet free stream."""
    rho = P_INF / (GAS_R * T_INF)
    c = np.sqrt(GAMMA * GAS_R * T_INF)
    return float(rho), float(MACH_INF * c), 0.0, P_INF


# Roy et al. (2004), supersonic case: for each of rho, u, v, p the constant phi0, the x- and y-amplitudes and
# the x- and y-wave numbers (in units of pi/L, L = 1 m). Which of sine/cosine is used is fixed per variable
# below.
MMS = np.array(
    [
        # phi0,   phi_x,  phi_y,  a_x, a_y
        [1.0, 0.15, -0.1, 1.0, 0.5],  # rho: sin(x), cos(y)
        [800.0, 50.0, -30.0, 1.5, 0.6],  # u:   sin(x), cos(y)
        [800.0, -75.0, 40.0, 0.5, 2.0 / 3.0],  # v:   cos(x), sin(y)
        [1.0e5, 0.2e5, 0.5e5, 2.0, 1.0],  # p:   cos(x), sin(y)
    ],
    dtype=np.float64,
)
MMS_L = 1.0


def mms_exact(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(4, ...) primitive variables of the manufactured solution at (x, y)."""
    k = np.pi / MMS_L
    c = MMS
    rho = c[0, 0] + c[0, 1] * np.sin(c[0, 3] * k * x) + c[0, 2] * np.cos(c[0, 4] * k * y)
    u = c[1, 0] + c[1, 1] * np.sin(c[1, 3] * k * x) + c[1, 2] * np.cos(c[1, 4] * k * y)
    v = c[2, 0] + c[2, 1] * np.cos(c[2, 3] * k * x) + c[2, 2] * np.sin(c[2, 4] * k * y)
    p = c[3, 0] + c[3, 1] * np.cos(c[3, 3] * k * x) + c[3, 2] * np.sin(c[3, 4] * k * y)
    return np.stack([rho, u, v, p])


def conserved(w: np.ndarray) -> np.ndarray:
    """Primitive (rho, u, v, p) -> conserved (rho, rho u, rho v, rho E), stacked on axis 0."""
    r, u, v, p = w
    return np.stack([r, r * u, r * v, p / (GAMMA - 1.0) + 0.5 * r * (u * u + v * v)])


def mach(w: np.ndarray) -> np.ndarray:
    r, u, v, p = w
    return np.sqrt((u * u + v * v) / (GAMMA * p / r))


def oblique_shock(mach1: float, wedge_deg: float, gamma: float = GAMMA) -> dict[str, float]:
    """Weak oblique-shock solution (shock angle, pressure ratio, downstream Mach) for a wedge; the reference
    the inlet's ramp flow is tested against."""

    theta = np.radians(wedge_deg)
    m2 = mach1 * mach1

    def f(beta: float) -> float:
        s2 = np.sin(beta) ** 2
        return np.tan(theta) - 2.0 / np.tan(beta) * (m2 * s2 - 1.0) / (m2 * (gamma + np.cos(2 * beta)) + 2.0)

    mu = np.arcsin(1.0 / mach1)
    # The weak solution lies between the Mach angle and the angle of maximum deflection (~65 deg at Mach 4).
    betas = np.linspace(mu + 1e-6, np.radians(89.0), 2000)
    vals = np.array([f(b) for b in betas])
    k = int(np.argmax(vals < 0))  # first sign change from positive (too weak) to negative
    beta = brentq(f, betas[k - 1], betas[k])
    mn1 = mach1 * np.sin(beta)
    p_ratio = 1.0 + 2.0 * gamma / (gamma + 1.0) * (mn1 * mn1 - 1.0)
    mn2 = np.sqrt((1.0 + 0.5 * (gamma - 1.0) * mn1 * mn1) / (gamma * mn1 * mn1 - 0.5 * (gamma - 1.0)))
    mach2 = mn2 / np.sin(beta - theta)
    rho_ratio = (gamma + 1.0) * mn1 * mn1 / ((gamma - 1.0) * mn1 * mn1 + 2.0)
    return {
        "beta_deg": float(np.degrees(beta)),
        "p_ratio": float(p_ratio),
        "mach2": float(mach2),
        "rho_ratio": float(rho_ratio),
    }
