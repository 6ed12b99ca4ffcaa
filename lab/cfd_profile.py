"""Helpers for the second GPU session: what one time step really moves, and how close CuPy is to numpy.

python -m lab.cfd_profile step --size 3328x1024     # warm-up step + one step (profile under ncu)
python -m lab.cfd_profile crosscheck                # max |cupy - numpy| / max |numpy| per variable
python -m lab.cfd_profile retime --size 3328x1024   # each kernel alone at the default, three rounds
python -m lab.cfd_profile fused --config JSON       # a fused configuration: 3 warm-up steps, then 2
                                                           # (under ncu: -k stage_fused --launch-skip 12)
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from launchtune.kernels.cfd.physics import KERNEL_NAMES
from launchtune.kernels.cfd.solver import Solver


def step(size: str) -> None:
    s = Solver("inlet", size, "cupy", perturb=0.01)
    s.step()
    s.backend.synchronize()
    s.step()  # under ncu: --launch-skip 28 --launch-count 28 takes this step's launches
    s.backend.synchronize()


def fused(size: str, config: str) -> None:
    s = Solver("inlet", size, "cupy", perturb=0.01)
    space = s.space("fused")
    s.set_config(space.validate({**space.default, **json.loads(config)}))
    for _ in range(5):
        s.step()
    s.backend.synchronize()


def crosscheck(steps: int = 5) -> None:
    for case in ("inlet", "mms", "freestream"):
        a = Solver(case, (416, 128), "numpy", perturb=0.01 if case != "freestream" else 0.0, seed=3)
        b = Solver(case, (416, 128), "cupy", perturb=0.01 if case != "freestream" else 0.0, seed=3)
        for _ in range(steps):
            a.step()
            b.step()
        wa, wb = a.primitives(), b.primitives()
        rel = [float(np.abs(wa[q] - wb[q]).max() / np.abs(wa[q]).max()) for q in range(4)]
        same = int((wa == wb).sum())
        print(
            f"{case:<10} after {steps} steps at 416x128: max rel diff rho,u,v,p = "
            f"{', '.join(f'{r:.1e}' for r in rel)}; bitwise equal values {same}/{wa.size}"
        )


def retime(size: str, rounds: int = 3, repeats: int = 20) -> None:
    from benchmarks.cfd_step import kernel_args, time_alone

    s = Solver("inlet", size, "cupy", perturb=0.01)
    s.step()
    args = kernel_args(s)
    d = s.default_config()
    for r in range(rounds):
        row = []
        for k in KERNEL_NAMES:
            cfg = (d[f"{k}.blocks"], d[f"{k}.threads"])
            row.append(f"{k} {time_alone(s, k, args[k], [cfg], repeats)[0]:.4f}")
        print(f"round {r}: " + "  ".join(row))
    # the in-step times for comparison (ms per step, 4 stages)
    for _ in range(3):
        per, total = s.timed_step()
        print(
            "in-step ms/stage: "
            + "  ".join(f"{k} {per[k] / s.scheme.stages:.4f}" for k in KERNEL_NAMES)
            + f"  step {total:.3f}"
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["step", "crosscheck", "retime", "fused"])
    ap.add_argument("--size", default="3328x1024")
    ap.add_argument("--config", default="{}", help="fused: parameters over the fused space's default (JSON)")
    ns = ap.parse_args()
    actions = {
        "step": lambda: step(ns.size),
        "crosscheck": crosscheck,
        "retime": lambda: retime(ns.size),
        "fused": lambda: fused(ns.size, ns.config),
    }
    actions[ns.what]()
