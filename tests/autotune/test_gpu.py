"""Tuners on the CuPy backend: CUDA-event timing, the compiled kernels' limits, the same bits as untuned."""

from __future__ import annotations

import numpy as np
import pytest

from launchtune.kernels.autotune import IDLE, attach_tuners, tuning_summary

pytestmark = pytest.mark.gpu


def test_scan_on_the_gpu_tunes_within_kernel_limits_and_changes_no_bits():
    from launchtune.kernels.cfd.solver import Solver

    plain = Solver("inlet", "416x128", "cupy")
    tuned = Solver("inlet", "416x128", "cupy")
    tuners = attach_tuners(tuned, "scan", samples=3, period_s=None)
    for name, tuner in tuners.items():
        assert all(t <= tuned.max_threads_per_block[name] for _, t in tuner.candidates)
        assert type(tuner.tuner.clock).__name__ == "EventStopwatch"
    stages = tuned.scheme.stages
    steps = -(-(1 + 3 * stages * max(len(t.candidates) for t in tuners.values())) // stages) + 3
    for _ in range(steps):
        plain.step()
        tuned.step()
    assert all(t.state == IDLE for t in tuners.values())
    np.testing.assert_array_equal(plain.primitives(), tuned.primitives())
    summary = tuning_summary(tuners)
    for k in summary["kernels"].values():
        assert k["best_ms"] is not None and 0 < k["best_ms"] < 50
        assert 0 < k["timed_ms"] <= k["kernel_ms"] and 0 <= k["nonoptimal_share"] <= 1


def test_fused_whole_configuration_scan_on_the_gpu_changes_no_bits():
    from launchtune.kernels.autotune.whole import attach_whole_tuner
    from launchtune.kernels.cfd.solver import Solver

    plain = Solver("inlet", "416x128", "cupy")
    tuned = Solver("inlet", "416x128", "cupy")
    whole = attach_whole_tuner(tuned, "scan", scan_count=12, period_s=None)
    assert type(whole.tuner.clock).__name__ == "EventStopwatch"
    steps = 1 + 3 * 13 + 10
    for _ in range(steps):
        plain.step()
        whole.step()
    assert whole.tuner.state == IDLE
    # the tuner keeps the seven kernels' arithmetic (tile.arith 0) unless asked: switching changes no bit
    np.testing.assert_array_equal(plain.primitives(), tuned.primitives())
    s = whole.summary()
    assert s["config"] is not None and 0 < s["best_ms"] <= s["default_scan_ms"]
    assert s["candidates"] + len(s["rejected"]) == 13
