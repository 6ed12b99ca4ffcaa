"""The tuners inside the real CFD solver on the numpy backend (host clock): the contract the CLI relies on.
Each is a ``Tuning``, the object ``autotune(...)`` keeps per key."""

from __future__ import annotations

import numpy as np
import pytest

from launchtune.kernels.autotune import IDLE, Tuning, attach_tuners, save_tuning, tuning_summary

cfd = pytest.importorskip("launchtune.kernels.cfd.solver")


def test_scan_tunes_all_seven_kernels_and_the_answer_is_the_untuned_one(tmp_path):
    plain = cfd.Solver("inlet", "16x8", "numpy")
    tuned = cfd.Solver("inlet", "16x8", "numpy")
    tuners = attach_tuners(tuned, "scan", samples=3, period_s=None)
    assert sorted(tuners) == sorted(tuned.kernel_names)
    stages = tuned.scheme.stages
    assert all(isinstance(t, Tuning) for t in tuners.values())
    assert all(t.tuner.launches_per_sample == stages for t in tuners.values())  # a sample: a step's launches
    launches_per_scan = 1 + 3 * stages * len(tuners["rhs"].candidates)  # warm-up + samples x candidates
    steps = -(-launches_per_scan // tuned.scheme.stages) + 2
    for _ in range(steps):
        plain.step()
        tuned.step()
    assert all(t.state == IDLE for t in tuners.values())
    # launch parameters never change the numbers (grid-stride loops): tuning is invisible to the physics
    np.testing.assert_array_equal(plain.primitives(), tuned.primitives())
    summary = tuning_summary(tuners)
    for k in tuned.kernel_names:
        s = summary["kernels"][k]
        assert s["first_scan_launches"] == launches_per_scan
        assert s["launches"] == steps * tuned.scheme.stages
        assert (s["blocks"], s["threads"]) in tuners[k].candidates
    last = (launches_per_scan - 1) // tuned.scheme.stages  # steps_done while the scan's last launch ran
    assert summary["all_tuned_at_step"] == last and summary["kernels"]["rhs"]["first_scan_steps"] == last + 1
    written = save_tuning(tuners, tmp_path)
    assert written["launch_log"].exists() and written["tuning_table"].exists()

    again = cfd.Solver("inlet", "16x8", "numpy")
    locked = attach_tuners(again, "seeded", written["tuning_table"])
    assert all(t.state == IDLE for t in locked.values())
    assert {k: t.param for k, t in locked.items()} == {k: t.param for k, t in tuners.items()}
    assert all(t.seed.startswith("locked from runtime cpu 16x8") for t in locked.values())
    for _ in range(2):
        again.step()
    assert tuning_summary(locked)["nonoptimal_launches"] == 0  # locked at once: no launch elsewhere
