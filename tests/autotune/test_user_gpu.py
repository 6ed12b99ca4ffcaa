"""``autotune(...)`` on a real GPU: CUDA events, NVRTC compiling ahead, the untuned kernel's answer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from launchtune.kernels.autotune import IDLE, autotune

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
SAXPY = r"""
extern "C" __global__ void axpy(float *y, const float *x, const float a, const int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}
"""


def test_a_raw_kernel_in_place_tuned_with_verify_computes_what_the_untuned_kernel_does(tmp_path):
    import cupy as cp

    kernel = cp.RawKernel(SAXPY, "axpy")
    n = 1 << 20
    x = cp.asarray(np.random.default_rng(0).uniform(0, 1, n).astype(np.float32))
    plain, tuned_y = cp.zeros(n, cp.float32), cp.zeros(n, cp.float32)
    tuned = autotune(
        kernel,
        tune_params={"block_size_x": [32, 64, 128, 256, 512, 1024]},
        problem_size=lambda y, x, a, n: (int(n),),
        restore=[0],  # y is read and written
        verify=True,
        cache=tmp_path / "cache.json",
        scan=None,
    )
    launches = 1 + 3 * 6 + 20
    for _ in range(launches):
        kernel((-(-n // 32),), (32,), (plain, x, np.float32(0.5), np.int32(n)))  # the default: 32 threads
        tuned(tuned_y, x, np.float32(0.5), np.int32(n))
    cp.testing.assert_array_equal(tuned_y, plain)  # each call one launch: verify's extra ones restored
    (s,) = tuned.stats().values()
    assert s["state"] == IDLE and s["rejected"] == [] and s["verify_launches"] == 2 * 5
    assert type(tuned.clock).__name__ == "EventStopwatch" and 0 < s["best_ms"] < 10
    again = autotune(
        kernel,
        tune_params={"block_size_x": [32, 64, 128, 256, 512, 1024]},
        problem_size=lambda y, x, a, n: (int(n),),
        cache=tmp_path / "cache.json",
    )
    again(tuned_y, x, np.float32(0.5), np.int32(n))
    (s2,) = again.stats().values()
    assert s2["cache"] == "hit" and s2["config"] == s["config"] and s2["scans_finished"] == 0


def test_the_convolution_spec_compiled_ahead_and_seeded_matches_numpy(tmp_path):
    import cupy as cp

    from launchtune.kernels.examples.convolution import convolve

    table = REPO / "data" / "convolution" / "h100" / "sweep"
    tuned = autotune(
        spec=REPO / "kernels" / "examples" / "convolution.yaml",
        table=table if table.is_dir() else None,
        scan=5,
        verify=True,
        cache=False,
    )
    width, height = 512, 256
    rng = np.random.default_rng(1)
    image = rng.uniform(0, 1, (height + 14, width + 14)).astype(np.float32)
    filter_ = rng.uniform(0, 1, (15, 15)).astype(np.float32)
    out = cp.zeros((height, width), cp.float32)
    args = (out, cp.asarray(image), cp.asarray(filter_), np.int32(width), np.int32(height))
    for _ in range(1 + 3 * 8 + 5):
        out[...] = 0
        tuned(*args)
        np.testing.assert_allclose(cp.asnumpy(out), convolve(image, filter_), rtol=1e-5, atol=1e-4)
    (s,) = tuned.stats().values()
    assert s["state"] == IDLE and s["rejected"] == [] and s["problem_size"] == [512, 256, 1]
    assert s["verify_launches"] >= 2 * (s["candidates"] - 1)
    tuned.close()
