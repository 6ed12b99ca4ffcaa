"""Kernel Tuner's calls on a GPU (skipped without one): ``run_kernel`` launches once and returns the
arguments after it; ``tune_kernel`` returns Kernel Tuner's ``(results, env)`` with the sweep's result on
it, takes CuPy arrays, checks ``answer`` and merges its results into a Kernel Tuner cache, which
``simulation_mode`` then replays."""

from __future__ import annotations

import json

import numpy as np
import pytest

import launchtune

pytestmark = pytest.mark.gpu

SOURCE = """
__global__ void vector_add(float *c, float *a, float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
"""
N = 100_000


def _arrays():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    return a, b, [np.zeros_like(a), a, b, np.int32(N)]


def test_run_kernel_returns_the_arguments_after_one_launch():
    a, b, arguments = _arrays()
    out = launchtune.run_kernel("vector_add", SOURCE, N, arguments, {"block_size_x": 128})
    assert np.allclose(out[0], a + b) and np.array_equal(out[1], a) and out[3] == N


def test_tune_kernel_is_kernel_tuners_pair_and_its_cache(tmp_path):
    import cupy as cp

    a, b, arguments = _arrays()
    arguments[1], arguments[2] = cp.asarray(a), cp.asarray(b)  # device arrays, as vector_add_cupy passes
    tune_params = {"block_size_x": [64, 128, 256]}
    results, env = tuned = launchtune.tune_kernel(
        "vector_add", SOURCE, N, arguments, tune_params, answer=[a + b, None, None, None],
        cache=tmp_path / "vector_add", out=tmp_path / "out", quiet=True, lang="CUPY",
    )  # fmt: skip
    assert sorted(r["block_size_x"] for r in results) == [64, 128, 256]
    assert all(isinstance(r["time"], float) and r["time"] > 0 for r in results)
    assert env["best_config"] == min(results, key=lambda r: r["time"]) and env["device_name"]
    assert (
        tuned.best["block_size_x"] in tune_params["block_size_x"]
        and tuned.folder == (tmp_path / "out").resolve()
    )
    cache = json.loads((tmp_path / "vector_add.json").read_text())
    assert sorted(cache["cache"]) == ["128", "256", "64"]
    replayed, env2 = launchtune.tune_kernel(
        "vector_add", SOURCE, N, arguments, tune_params, cache=tmp_path / "vector_add.json",
        simulation_mode=True, quiet=True,
    )  # fmt: skip
    assert [r["time"] for r in replayed] == [cache["cache"][k]["time"] for k in cache["cache"]]
    assert env2["best_config"]["time"] == env["best_config"]["time"]


def test_on_one_gpu_verify_runs_here_cupy_arrays_stay_and_the_cache_is_kernel_tuners(tmp_path):
    """One local GPU measures in this process: ``verify`` sees each configuration's outputs, the CuPy
    arrays are used in place (none written as .npy; the kernel writes into ``c``), and the cache file is
    Kernel Tuner's own (its reader takes it, its entries have ``times``)."""
    import cupy as cp

    kt_util = pytest.importorskip("kernel_tuner.util")
    a, b, _ = _arrays()
    c, da, db = cp.zeros(N, cp.float32), cp.asarray(a), cp.asarray(b)
    sums = []

    def verify(answer, result_host, atol=None):
        sums.append(float(np.sum(result_host[0])))
        return bool(np.isclose(answer[0], np.sum(result_host[0]), rtol=1e-4, atol=atol))

    tune_params = {"block_size_x": [64, 128, 256]}
    results, _ = launchtune.tune_kernel(
        "vector_add", SOURCE, N, [c, da, db, np.int32(N)], tune_params,
        answer=[np.sum(a + b), None, None, None], verify=verify, atol=1e-2, cache=tmp_path / "kt.json",
        out=tmp_path / "out", quiet=True,
    )  # fmt: skip
    assert all(isinstance(r["time"], float) for r in results) and len(sums) >= 3
    assert cp.allclose(c, da + db)  # written in place
    (inputs,) = (tmp_path / "out" / "inputs").iterdir()
    assert not list(inputs.glob("arg*.npy"))
    cache = kt_util.read_cache(str(tmp_path / "kt.json"), open_cache=False)
    assert sorted(cache["cache"]) == ["128", "256", "64"]
    assert all(len(e["times"]) == 7 for e in cache["cache"].values())
