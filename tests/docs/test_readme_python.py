"""The README's Python example runs as written from the repository root: on a GPU to its result; without
one, the call refuses in one line that no GPU is here, before anything is written, and (the GPU check and
the sweep stood aside) every argument is accepted and written as a kernel spec the loader checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from launchtune import api
from launchtune.kernels.device import visible_gpu_names
from launchtune.kernels.kernel.spec import load_kernel_spec

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_python_example(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    for other in blocks:  # every Python block of the README parses
        compile(other, "README.md", "exec")
    (block,) = [b for b in blocks if "tune_kernel(" in b]
    monkeypatch.setenv("LAUNCHTUNE_RESULTS", str(tmp_path))
    monkeypatch.chdir(ROOT)
    if visible_gpu_names():
        exec(compile(block, "README.md", "exec"), {})
        (folder,) = tmp_path.glob("convolution_kernel-*")
        assert (folder / "tuning_table.json").is_file()
        return
    with pytest.raises(api.NoGPUError, match="^no GPU here"):
        exec(compile(block, "README.md", "exec"), {})
    assert not any(tmp_path.iterdir())
    monkeypatch.setattr(api, "_check_gpu", lambda cluster: None)
    monkeypatch.setattr(api, "sweep", lambda *a, **k: None)
    monkeypatch.setattr(api, "_kernel_tuner_pair", lambda *a: (None, {"best_config": None}))
    exec(compile(block, "README.md", "exec"), {})
    (folder,) = tmp_path.glob("convolution_kernel-*")
    (inputs,) = (folder / "inputs").iterdir()
    spec = load_kernel_spec(inputs / "kernel.yaml")
    assert spec.kernel_name == "convolution_kernel" and [a.constant for a in spec.arguments][2] == "d_filter"
    assert spec.names == ["block_size_x", "block_size_y", "tile_size_x", "tile_size_y", "filter_height",
                          "filter_width"]  # fmt: skip
