"""On a GPU: a program whose ``launchtune.tune_kernel`` is ended by SIGTERM leaves no process on the GPU
(issue 54: its Dask workers held 716 MB and 2.8 GB of GPU memory after it). ``nvidia-smi`` lists the compute
processes before and after; run on the GPU machine with ``pytest -q tests/faults/test_sigterm_gpu.py``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO

HANG = 120  # seconds: far above what ending a sweep takes; only a hang reaches it

_PROGRAM = """
import sys
import numpy as np
import launchtune

n = 1 << 26
source = '''
__global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
'''
a, b = np.random.default_rng(0).random((2, n), dtype=np.float32)
launchtune.tune_kernel(
    "vector_add", source, n, [np.zeros_like(a), a, b, np.int32(n)],
    {"block_size_x": [32 * k for k in range(1, 33)]}, iterations=101, out=sys.argv[1], progress=False,
)
"""


def _gpu_pids() -> set[int]:
    """The pids of the compute processes ``nvidia-smi`` lists on any GPU."""
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return {int(line) for line in out.split() if line.strip().isdigit()}


def _group_pids(pgid: int) -> set[int]:
    import psutil

    found = set()
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.info["pid"]) == pgid:
                found.add(p.info["pid"])
        except (ProcessLookupError, PermissionError):
            continue
    return found


@pytest.mark.gpu
def test_a_tune_kernel_ended_by_sigterm_leaves_no_process_on_the_gpu(tmp_path):
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no nvidia-smi")
    before = _gpu_pids()
    proc = subprocess.Popen(
        [sys.executable, "-c", _PROGRAM, str(tmp_path / "out")],
        cwd=REPO,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    ours: set[int] = set()
    try:
        for _ in range(HANG * 2):  # until a process of the program's group holds the GPU: it is measuring
            ours |= _group_pids(proc.pid)
            if _gpu_pids() & ours - before or proc.poll() is not None:
                break
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        if not _gpu_pids() & ours:  # a container's pid namespace hides them from nvidia-smi
            proc.send_signal(signal.SIGKILL)
            pytest.skip(f"nvidia-smi lists no process of the program within {HANG} s (pid namespace?)")
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running {HANG} s after SIGTERM") from None
    finally:
        for _ in range(HANG):  # the workers' own ends take a moment after the program's
            if not (_gpu_pids() & ours) and not _group_pids(proc.pid):
                break
            time.sleep(1)
        left = _gpu_pids() & ours
        stray = _group_pids(proc.pid)
        if stray:
            os.killpg(proc.pid, signal.SIGKILL)
    assert not left, f"processes {sorted(left)} of the program still on the GPU {HANG} s after SIGTERM"
    assert not stray, f"processes {sorted(stray)} of the program still running {HANG} s after SIGTERM"
    assert proc.returncode == -signal.SIGTERM
