"""A small valid kernel spec in a temporary folder, and a way to write variants of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

SOURCE = """
extern "C" __global__ void scale(float *out, const float *in, const int n) {
    int i = blockIdx.x * block_size_x * tile + threadIdx.x;
    for (int t = 0; t < tile; t++, i += block_size_x) {
        if (i < n) out[i] = 2.0f * in[i];
    }
}
"""


def base_spec() -> dict[str, Any]:
    return {
        "source": "scale.cu",
        "kernel_name": "scale",
        "problem_size": [1000],
        "tune_params": {"block_size_x": [32, 64, 128], "tile": [1, 2, 4]},
        "restrictions": ["block_size_x * tile <= 256"],
        "grid_div_x": ["block_size_x", "tile"],
        "arguments": [
            {"name": "out", "dtype": "float32", "shape": ["problem_size_x"], "output": True},
            {"name": "in", "dtype": "float32", "shape": "problem_size_x", "fill": {"uniform": [-1, 1]}},
            {"name": "n", "dtype": "int32", "value": "problem_size_x"},
        ],
    }


@pytest.fixture
def write_spec(tmp_path: Path):
    """``write_spec(**changes)`` -> path of a spec: the base one with keys replaced (None removes one)."""
    (tmp_path / "scale.cu").write_text(SOURCE)

    def write(name: str = "kernel.yaml", **changes: Any) -> Path:
        data = base_spec()
        for key, value in changes.items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write
