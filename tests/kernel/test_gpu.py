"""The kernel workload on a GPU: the example convolution against numpy on random configurations, the reasons
of invalid rows (a compile error, too many threads, too much shared memory), compile time kept out of the
measured time, compiling ahead, and a small sweep end to end through the real CLI."""

from __future__ import annotations

import json
import shutil
import uuid

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from launchtune.kernels.examples.convolution import convolve
from launchtune.kernels.kernel.workload import make_workload
from tests.conftest import REPO
from tests.pipeline.conftest import run_cli

pytestmark = pytest.mark.gpu

CONVOLUTION = str(REPO / "kernels" / "examples" / "convolution.yaml")
SIZE = "520x300"  # not a multiple of any tile: every edge guard is exercised


def test_convolution_matches_numpy_on_random_configurations():
    w = make_workload("convolution", SIZE, "cupy", spec=CONVOLUTION, seed=5, compile_workers=4)
    space = w.space()
    configs = [space.default, *space.sample(16, seed=11)]
    w.compile_ahead(configs)
    output, image, filter_, width, height = w._host  # the arguments as made on the host
    assert (int(width), int(height)) == (520, 300)
    want = convolve(image, filter_)
    cp = w.cp
    for config in configs:
        compiled = w.compiled(config)
        assert not w._problems(config, compiled), config
        got = cp.asnumpy(w._outputs_after_one_launch(config, compiled)[0])
        # float32 sums of 225 products near 56 against float64: a wrong index or tile is off by whole units
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-3, err_msg=str(config))
        assert w.check(config).ok, config


def _spec(tmp_path, source: str, tune: dict, **extra) -> str:
    (tmp_path / "k.cu").write_text(source)
    spec = {
        "source": "k.cu",
        "kernel_name": "k",
        "problem_size": [4096],
        "tune_params": tune,
        "arguments": [
            {"name": "out", "dtype": "float32", "shape": ["problem_size_x"], "output": True},
            {"name": "n", "dtype": "int32", "value": "problem_size_x"},
        ],
        **extra,
    }
    path = tmp_path / "k.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


KERNEL = """
extern "C" __global__ void k(float *out, const int n) {
#if broken
    this is not CUDA;
#endif
#if shared_floats > 1
    __shared__ float scratch[shared_floats];
    scratch[threadIdx.x % shared_floats] = threadIdx.x;
    __syncthreads();
    float extra = scratch[(threadIdx.x + 1) % shared_floats] * 0.0f;
#else
    float extra = 0.0f;
#endif
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * i + extra + (wrong ? 1.0f : 0.0f);
}
"""


def test_invalid_rows_say_why(tmp_path):
    tune = {"block_size_x": [128, 2048], "broken": [0, 1], "shared_floats": [1, 16384], "wrong": [0, 1]}
    w = make_workload("k", None, "cupy", spec=_spec(tmp_path, KERNEL, tune), compile_workers=0)
    base = {"block_size_x": 128, "broken": 0, "shared_floats": 1, "wrong": 0}
    assert w.check(base).ok
    compile_error = w.check({**base, "broken": 1})
    assert (
        not compile_error.ok
        and compile_error.reason.startswith("compile error: ")
        and "error" in compile_error.reason
    )
    threads = w.check({**base, "block_size_x": 2048})
    assert not threads.ok and "block of 2048 threads over the compiled kernel's limit of" in threads.reason
    shared = w.check({**base, "shared_floats": 16384})  # 64 KiB of static shared memory
    # ptxas's "uses too much shared data" where NVRTC makes a cubin; the driver's PTX JIT error otherwise
    assert not shared.ok and shared.reason.startswith("compile error: ")
    assert "shared" in shared.reason or "PTX" in shared.reason
    wrong = w.check({**base, "wrong": 1})
    assert not wrong.ok and wrong.reason.startswith("out[0] = 1, expected 0 (difference 1 over atol")
    assert "4096 elements differ" in wrong.reason
    timing = w.run(base, 3)
    assert timing.total > 0 and timing.kernels == {"k": timing.total}


def _fresh_convolution(tmp_path) -> str:
    """The example's spec beside a copy of its source, with a compiler option no earlier run used, so nothing
    is in CuPy's caches: its first use compiles."""
    shutil.copy(REPO / "kernels" / "examples" / "convolution.cu", tmp_path / "convolution.cu")
    spec = yaml.safe_load(open(CONVOLUTION))
    spec["compiler_options"] = [f"-DLAUNCHTUNE_TEST_NONCE={uuid.uuid4().int % 10**12}"]
    path = tmp_path / "convolution.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def test_compile_time_is_its_own_column_not_in_the_measured_time(tmp_path):
    w = make_workload("convolution", SIZE, "cupy", spec=_fresh_convolution(tmp_path), compile_workers=0)
    config = w.space().sample(1, seed=3)[0]
    timing = w.run(config, 5)  # not checked first: this call compiles (NVRTC: hundreds of ms)
    assert timing.extra["compile_ms"] > 0
    # the kernel at this size takes well under a millisecond: had the compile been inside the events, the
    # median launch would hold it
    assert timing.total < timing.extra["compile_ms"]
    again = w.run(config, 5)
    assert again.extra["compile_ms"] == 0  # compiled once per process


def test_compiling_ahead_compiles_each_configuration_once():
    w = make_workload("convolution", SIZE, "cupy", spec=CONVOLUTION, compile_workers=4)
    w.reference_outputs()  # the default configuration: compiled and run first
    configs = [c for c in w.space().sample(9, seed=21) if c != w.space().default][:8]
    assert w.compile_ahead(configs) == 8
    assert w.compile_ahead(configs) == 0
    for config in configs:
        assert w.check(config).ok
    assert w.take_compile_ms() > 0
    assert w.compile_ahead(configs) == 0


def test_a_small_kernel_sweep_end_to_end(tmp_path):
    tune = {"block_size_x": list(range(32, 385, 32)), "broken": [0, 1], "shared_floats": [1], "wrong": [0]}
    _spec(tmp_path, KERNEL, tune)
    sweep = {
        "name": "tiny_kernel",
        "workload": "kernel",
        "case": "k",
        "size": "100000",
        "backend": "cupy",
        "options": {"spec": "k.yaml", "compile_workers": 2},
        "samplers": ["exhaustive"],
        "samples": 0,
        "repeats": 3,
        "batch_size": 4,
        "validate": {"pool": 100, "top_k": 2, "repeats": 3, "rounds": 3},
        "train": {"hidden_layers": [8], "max_epochs": 20},
    }
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    out = tmp_path / "out"
    result = run_cli("sweep", str(tmp_path / "sweep.yaml"), "--out", str(out), cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = pq.read_table(out / "merged").to_pandas()
    assert len(rows) == 24
    assert set(rows.loc[rows["broken"] == 0, "status"]) == {"ok"}
    assert set(rows.loc[rows["broken"] == 1, "status"]) == {"invalid"}
    assert rows.loc[rows["broken"] == 1, "reason"].str.startswith("compile error:").all()
    assert rows["compile_ms"].notna().all()
    table = json.loads((out / "tuning_table.json").read_text())
    assert table["entries"][0]["best"]["broken"] == 0
    header = tmp_path / "k_tuned.h"
    result = run_cli("export", "--format", "c-header", str(out), str(header), cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "#if defined(TARGET_" in header.read_text()
    cache = tmp_path / "k.json"  # the measurements as a Kernel Tuner cache, as for any sweep
    result = run_cli("export", "--format", "kernel-tuner", str(out), str(cache), cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(cache.read_text())["kernel_name"]
