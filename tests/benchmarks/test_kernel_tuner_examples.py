"""Kernel Tuner's CUDA examples with only the import changed, on the CPU, as far as a CPU takes them: where
the lead's GPU run committed a launchtune cache per call (``data/kernel_tuner_examples/caches/<name>/``),
the script runs replaying them (``simulation_mode``): to its end, or, where the run recorded fewer calls
than the script makes, through every recorded one (so caches committed later are replayed as they come);
otherwise it runs up to ``tune_kernel``'s (or ``run_kernel``'s) one-line refusal without a GPU, with nothing
written. And past that refusal (the GPU check stood aside), each example's kernel spec and sweep spec load
and pass every check made before a device."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.kernel_tuner_examples import NO_CACHE_EXIT, run_one

CACHES = Path(__file__).resolve().parents[2] / "data" / "kernel_tuner_examples" / "caches"
NO_GPU = "launchtune.api.NoGPUError: no GPU here (CuPy sees none)"
STOPS = {
    "vector_add": NO_GPU,
    "stencil": NO_GPU,
    "zeromeanfilter": NO_GPU,
    "vector_add_metric": NO_GPU,
    "convolution": NO_GPU,
    "convolution_correct": NO_GPU,  # at run_kernel, the naive kernel's answer
    "sepconv": NO_GPU,
    "vector_add_codegen": NO_GPU,
    "matmul": NO_GPU,
}
# only replayed: reduction builds 3.2 GB of inputs (numpy.random.rand(800_000_000)) before its first call,
# which a replay stands in for by their shape (benchmarks.kernel_tuner_examples.REPLAY_MAX_RANDOM) but a run
# to the refusal would build; its verify= on a sum is tested on the CPU in tests/api/test_in_process.py.
# Not on the CPU: vector_add_cupy imports CuPy first.
REPLAYED_ONLY = {"reduction"}
SLOW = {"matmul"}  # numpy.dot of two 4096 x 4096 matrices for its answer
NAMES = [*STOPS, *(n for n in sorted(REPLAYED_ONLY) if (CACHES / n).is_dir())]


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in NAMES])
def test_example_runs_with_only_the_import_changed(tmp_path, name):
    if (CACHES / name).is_dir():  # recorded on a GPU: it runs through every recorded call
        recorded = len(list((CACHES / name).glob("*.json")))
        row = run_one(name, "launchtune", tmp_path, replay=CACHES)
        assert row["rc"] == 0 or (row["rc"] == NO_CACHE_EXIT and len(row["calls"]) == recorded), row[
            "last_lines"
        ]
        assert len(row["calls"]) == recorded and all(c["ok"] >= 1 for c in row["calls"])
        return
    row = run_one(name, "launchtune", tmp_path)
    assert row["rc"] == 1 and row["last_lines"][-1].startswith(STOPS[name]), row["last_lines"]
    assert not (tmp_path / "launchtune" / name / "results").exists()  # nothing written before the refusal


SPEC_CHECK = """
import re, sys
import numpy
from launchtune import api
from launchtune.kernels.kernel.spec import check_for_problem, load_kernel_spec
from launchtune.pipeline.store.spec import load_spec

numpy.dot = lambda a, b: numpy.zeros((a.shape[0], b.shape[1]), a.dtype)  # matmul's answer: its shape only
api._check_gpu = lambda cluster: None
api.run_kernel = lambda name, source, size, args, params, **kw: [numpy.asarray(a) for a in args]

class Stop(Exception):
    pass

def sweep(spec, **kw):  # what a GPU's sweep would read first: both specs, checked as the workers check them
    plan = load_spec(spec)
    kernel = load_kernel_spec(plan.options["spec"])
    problem = kernel.problem(plan.size)
    check_for_problem(kernel, problem, None)
    print("SPEC OK", kernel.space(problem).cardinality)
    raise Stop

api.sweep = sweep
try:
    exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), {"__name__": "__main__"})
except Stop:
    pass
"""


@pytest.mark.parametrize("name", list(STOPS))
def test_example_specs_load_as_a_gpu_worker_reads_them(tmp_path, name):
    """Past the GPU check (stood aside here): each example's first call writes a kernel spec and a sweep
    spec that load and pass every check made before a device (restrictions, the default configuration,
    grids, shapes), so on a GPU the script reaches its measurements."""
    import os
    import shutil
    import subprocess
    import sys

    from benchmarks.kernel_tuner_examples import EXAMPLES, with_launchtune

    for cu in EXAMPLES.glob("*.cu"):
        shutil.copy(cu, tmp_path / cu.name)
    (tmp_path / "script.py").write_text(with_launchtune((EXAMPLES / f"{name}.py").read_text()))
    env = {**os.environ, "LAUNCHTUNE_RESULTS": str(tmp_path / "results")}
    done = subprocess.run([sys.executable, "-c", SPEC_CHECK, "script.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env=env)  # fmt: skip
    assert done.returncode == 0 and "SPEC OK" in done.stdout, done.stderr[-2000:]
