"""Nothing left running (issue 54): the training pool and the resource trackers a sweep starts end with the
sweep, on success and failure, in the caller's own process (the Python API) and after it; a program whose
main thread ends while a sweep runs in another thread leaves no Dask worker behind."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.pipeline.conftest import FAKE, REPO

HANG = 240  # seconds: far above what any case takes; only a hang reaches it

_SWEEP_THEN_LOOK = """
import sys
import psutil
import launchtune
from launchtune.pipeline.sweep import run

if sys.argv[3] == "fail":  # the sweep fails after its models are trained (the pool started)
    def fail(*args, **kwargs):
        raise RuntimeError("the re-measure failed")
    run._Sampled.remeasure = fail
try:
    launchtune.sweep(sys.argv[1], out=sys.argv[2], allow_workload=[sys.argv[4]], progress=False)
except RuntimeError as exc:
    print("failed:", exc)
left = [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
print("left:", [" ".join(p.cmdline())[-90:] for p in left])
"""


@pytest.mark.parametrize("ending", ["ok", "fail"])
def test_the_training_pool_and_its_trackers_end_with_the_sweep(tmp_path, write_spec, ending):
    """A sweep through the Python API (one device: measured in the caller's process), models trained in
    joblib's process pool: once ``sweep`` returns or raises, the caller's process has no child left (the
    pool's idle workers waited 300 s for more work, with its resource tracker, and outlived a caller that
    ended meanwhile, re-parented to pid 1)."""
    spec = write_spec(samples=20, batch_size=10)
    done = subprocess.run(
        [sys.executable, "-c", _SWEEP_THEN_LOOK, str(spec), str(tmp_path / "out"), ending, FAKE],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"},
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    if ending == "fail":
        assert "failed: the re-measure failed" in done.stdout, done.stdout[-2000:]
    assert "left: []" in done.stdout, done.stdout[-2000:]
