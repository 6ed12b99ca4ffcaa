"""The README's Python example runs as written from the repository root: on a GPU to its result; without
one, every argument is accepted and written as a kernel spec the loader checks, and the sweep refuses in
one line that no GPU is visible (the kernel workload compiles and runs CUDA)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from launchtune.kernels.device import visible_gpu_names
from launchtune.kernels.kernel.spec import load_kernel_spec
from launchtune.pipeline.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_python_example(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    for other in blocks:  # every Python block of the README parses
        compile(other, "README.md", "exec")
    (block,) = [b for b in blocks if "tune_kernel(" in b]
    monkeypatch.setenv("LAUNCHTUNE_RESULTS", str(tmp_path))
    monkeypatch.chdir(ROOT)
    folder = tmp_path / "convolution_kernel"
    if visible_gpu_names():
        exec(compile(block, "README.md", "exec"), {})
        assert (folder / "tuning_table.json").is_file()
        return
    with pytest.raises(UserError, match="workload: kernel compiles and runs CUDA and no GPU is visible"):
        exec(compile(block, "README.md", "exec"), {})
    (inputs,) = (folder / "inputs").iterdir()
    spec = load_kernel_spec(inputs / "kernel.yaml")
    assert spec.kernel_name == "convolution_kernel" and [a.constant for a in spec.arguments][2] == "d_filter"
    assert spec.names == ["block_size_x", "block_size_y", "tile_size_x", "tile_size_y", "filter_height",
                          "filter_width"]  # fmt: skip
