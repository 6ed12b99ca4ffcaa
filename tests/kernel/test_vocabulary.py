"""The rest of Kernel Tuner's vocabulary in a kernel spec, checked on the text handed to the compiler (CuPy
stood in for): float and text parameter values as ``#define`` text, ``in`` / ``not in`` in restrictions,
templated kernel names, problem sizes of the parameters, dynamic shared memory, several source files; and
includes as a user writes them (the source's folder and relative ``-I`` on the include path, local headers in
the compile-cache key), and a default that cannot compile stopping a sweep with one line."""

from __future__ import annotations

import pytest

from launchtune.kernels.kernel import workload as workload_module
from launchtune.kernels.kernel.errors import SpecError
from launchtune.kernels.kernel.expressions import ExpressionError, parse
from tests.kernel import fake_cupy

TEMPLATED_SOURCE = """
#include "helpers.h"
template <typename T, int B>
__global__ void scale(T *out, const T *in, const int n) {
    int i = blockIdx.x * B + threadIdx.x;
    if (i < n) out[i] = FACTOR * in[i];
}
"""


class SharedRecorder(fake_cupy.FakeFunction):
    shared: list[int] = []

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        SharedRecorder.shared.append(shared_mem)
        return super().__call__(grid, block, args)


class Recorder:
    """A fake ``RawModule`` that keeps what it was handed (the real compile is the GPU tests')."""

    calls: list[dict] = []

    def __init__(self, code, options=(), name_expressions=()):
        Recorder.calls.append({"code": code, "options": list(options), "names": list(name_expressions)})
        if "#define broken 1" in code:
            raise fake_cupy.CompileException(
                'k.cu(7): error: identifier "oops" is undefined\n1 error detected'
            )
        self.function = SharedRecorder({})

    def get_function(self, name):
        return self.function

    def get_global(self, name):
        raise RuntimeError("CUDA_ERROR_NOT_FOUND")


@pytest.fixture
def make(monkeypatch, write_spec):
    backend = fake_cupy.fake_backend()
    backend.xp.RawModule = Recorder
    monkeypatch.setattr(workload_module, "get_backend", lambda name: backend)
    Recorder.calls = []

    def build(**changes):
        path = write_spec(**changes)
        return workload_module.make_workload("scale", None, "cupy", spec=str(path), compile_workers=0)

    return build


def test_in_and_not_in_over_written_out_lists():
    e = parse("block_size_x in [128, 256] and kind not in ('slow',)", ["block_size_x", "kind"], "r")
    assert e({"block_size_x": 128, "kind": "fast"}) is True
    assert e({"block_size_x": 64, "kind": "fast"}) is False
    assert e({"block_size_x": 256, "kind": "slow"}) is False
    with pytest.raises(ExpressionError, match="Mult of text"):
        parse("'a' * 10**9", [], "r")({})


def test_float_and_text_values_reach_the_source_as_define_text(make):
    w = make(
        tune_params={
            "block_size_x": [32, 64],
            "tile": [1],
            "factor": [0.5, 2.0],
            "real": ["float", "double"],
        },
        restrictions=["real in ['float', 'double'] and factor * 2 >= 1", "real != 'double' or factor > 1"],
        default={"real": "double", "factor": 2.0},
    )
    space = w.space()
    assert space.default["real"] == 1 and space.default["factor"] == 1  # indices of the values
    assert not space.is_valid({"block_size_x": 32, "tile": 1, "factor": 0, "real": 1})
    w.compiled({"block_size_x": 64, "tile": 1, "factor": 0, "real": 0})
    code = Recorder.calls[-1]["code"]
    assert (
        "#define factor 0.5\n" in code
        and "#define real float\n" in code
        and "#define block_size_x 64\n" in code
    )


def test_a_templated_kernel_name_is_asked_for_with_the_parameters_values(make, tmp_path):
    (tmp_path / "helpers.h").write_text("#define FACTOR 2\n")
    (tmp_path / "scale.cu").write_text(TEMPLATED_SOURCE)
    w = make(kernel_name="scale<float, block_size_x>")
    assert w.describe()["kernels"] == ["scale"]
    w.compiled({"block_size_x": 64, "tile": 2})
    assert Recorder.calls[-1]["names"] == ["scale<float, 64>"]
    with pytest.raises(SpecError, match="kernel_name: no '__global__ ... nope\\('"):
        make(kernel_name="nope<float>")
    with pytest.raises(SpecError, match="kernel_name: expected the kernel's name"):
        make(kernel_name="scale<float>; system")


def test_includes_work_as_a_user_writes_them(make, tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "helpers.h").write_text("#define FACTOR 2\n")
    (tmp_path / "scale.cu").write_text(TEMPLATED_SOURCE)
    w = make(
        kernel_name="scale<float, block_size_x>", compiler_options=["-I.", "-I", "inc", "--use_fast_math"]
    )
    w.compiled({"block_size_x": 64, "tile": 2})
    options = Recorder.calls[-1]["options"]
    assert options == [f"-I{tmp_path}", f"-I{tmp_path}", "-I", str(tmp_path / "inc"), "--use_fast_math"]
    assert "// launchtune: local headers " in Recorder.calls[-1]["code"]


def test_an_edited_header_is_another_compile_cache_key(make, tmp_path):
    (tmp_path / "helpers.h").write_text("#define FACTOR 2\n")
    (tmp_path / "scale.cu").write_text(TEMPLATED_SOURCE)
    config = {"block_size_x": 64, "tile": 2}
    first_key, (first_text, _) = make(kernel_name="scale<float, block_size_x>")._source(config)
    (tmp_path / "helpers.h").write_text("#define FACTOR 3\n")
    second_key, (second_text, _) = make(kernel_name="scale<float, block_size_x>")._source(config)
    assert first_key != second_key and first_text != second_text  # CuPy's disk cache is keyed by the text
    again_key, _ = make(kernel_name="scale<float, block_size_x>")._source(config)
    assert again_key == second_key


def test_several_source_files_are_the_kernel_and_what_it_includes(make, tmp_path):
    (tmp_path / "helpers.h").write_text("#define FACTOR 2\n")
    (tmp_path / "more.h").write_text("// more\n")
    (tmp_path / "scale.cu").write_text(TEMPLATED_SOURCE)
    w = make(source=["scale.cu", "more.h"], kernel_name="scale<float, block_size_x>")
    key, _ = w._source({"block_size_x": 64, "tile": 2})
    (tmp_path / "more.h").write_text("// changed\n")
    w2 = make(source=["scale.cu", "more.h"], kernel_name="scale<float, block_size_x>")
    assert w2._source({"block_size_x": 64, "tile": 2})[0] != key
    with pytest.raises(SpecError, match="source: no such file"):
        make(source=["scale.cu", "gone.h"])


def test_problem_size_of_the_parameters_sets_the_grid(make):
    w = make(problem_size=[1000, "tile * 3"], grid_div_y=["tile"])
    assert w.spec.grid({"block_size_x": 32, "tile": 4}, w.problem) == (-(-1000 // 32 // 4), 3, 1)


def test_dynamic_shared_memory_is_passed_at_launch_and_bounded_by_the_device(make):
    w = make(shared_memory="block_size_x * tile * 4 * 100")
    compiled = w.compiled({"block_size_x": 64, "tile": 2})
    assert w._shared({"block_size_x": 64, "tile": 2}, compiled) == 51200
    assert compiled.function.max_dynamic_shared_size_bytes == 51200  # opted in past 48 KiB
    w.max_shared_optin = 50000
    assert (
        "dynamic shared memory over the device's 50,000"
        in w._problems({"block_size_x": 64, "tile": 2}, compiled)[0]
    )
    assert w._problems({"block_size_x": 32, "tile": 1}, compiled) == []
    SharedRecorder.shared = []
    w.run({"block_size_x": 32, "tile": 2}, repeats=3)
    assert set(SharedRecorder.shared) == {32 * 2 * 4 * 100}  # the warm-up and every timed launch
    with pytest.raises(SpecError, match="shared_memory: .*unknown name 'tiles'"):
        make(shared_memory="tiles * 4")


def test_a_default_that_cannot_compile_is_one_line(make):
    w = make(tune_params={"block_size_x": [32, 64], "tile": [1, 2], "broken": [1, 0]})
    with pytest.raises(SpecError) as info:
        w.check_default()
    line = str(info.value)
    assert line.startswith(f"{w.spec.path}: the default configuration") and "\n" not in line
    assert 'compile error: k.cu(7): error: identifier "oops" is undefined' in line
    make(tune_params={"block_size_x": [32, 64], "tile": [1, 2], "broken": [0, 1]}).check_default()


@pytest.mark.parametrize("task", ["plan_task", "search_plan_task"])
def test_a_default_that_cannot_compile_stops_the_plan_before_any_measurement(make, tmp_path, task):
    """The sweep's (and a live search's) plan is the first thing a worker does: the default is tried there,
    and the ``SpecError`` reaches the sweep's process as one line, exit 2 (``waits.result``)."""
    from launchtune.pipeline.sweep import worker
    from tests.kernel.test_objective import _worker_spec

    w = make(tune_params={"block_size_x": [32, 64], "tile": [1, 2], "broken": [1, 0]})
    spec = _worker_spec(w, tmp_path)
    args = (["exhaustive"], 0, 0) if task == "plan_task" else (0, 100)
    try:
        with pytest.raises(SpecError, match="the default configuration .* cannot run: compile error"):
            getattr(worker, task)(spec, *args)
        assert not Recorder.calls[1:]  # nothing compiled past the default
    finally:
        worker._CACHE.clear()
