"""The sweep through the real CLI on a GPU: CuPy backend, one worker pinned per visible GPU."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from launchtune.kernels.device import gpu_class_of, visible_gpu_names
from tests.pipeline.conftest import run_cli


@pytest.mark.gpu
@pytest.mark.slow
def test_cupy_sweep_routes_to_the_gpu_class_and_verifies_every_row(tmp_path):
    spec = tmp_path / "gpu.yaml"
    spec.write_text(
        "name: gpu_tiny\nworkload: cfd\ncase: inlet\nsize: 416x128\nbackend: cupy\nsamples: 40\nrepeats: 3\n"
        "batch_size: 20\nsamplers: [random, per_kernel_exhaustive]\n"
        "validate: {pool: 500, top_k: 2, repeats: 5}\n"
        "train: {hidden_layers: [16], max_epochs: 20}\n"
    )
    result = run_cli("sweep", str(spec), cwd=tmp_path, timeout=600)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    classes = sorted({gpu_class_of(n) for n in visible_gpu_names()})
    out = tmp_path / "results/gpu_tiny"
    merged = pq.read_table(out / "merged", partitioning="hive").to_pandas()
    assert sorted(merged["gpu_class"].astype(str).unique()) == classes
    assert (merged["device_class"] == merged["gpu_class"].astype(str)).all()
    assert (merged["backend"] == "cupy").all()
    ok = merged[merged["status"] == "ok"]
    assert len(ok) == len(merged) and ok["verified"].all()  # CUDA results equal the default's, bit for bit
    per_kernel = merged[merged["sampler"] == "per_kernel_exhaustive"]
    assert len(per_kernel) > 0 and (per_kernel["status"] == "ok").all()
    report = json.loads((out / "report.json").read_text())
    for cls in classes:
        assert report["classes"][cls]["default_measured_ms"] > 0
        assert report["classes"][cls]["predicted_best_measured_ms"] > 0
