"""The compile step without a GPU: the source a configuration compiles, the cache key, the compiler's first
error line, and the compile-ahead pool (with a stand-in for NVRTC that counts what it compiles)."""

from __future__ import annotations

import threading

from launchtune.kernels.kernel.compile import Compiler, cache_key, first_error_line, source_with_defines
from launchtune.kernels.kernel.spec import load_kernel_spec


def test_source_gets_kernel_tuners_defines_and_line_directive(write_spec):
    spec = load_kernel_spec(write_spec())
    defines = spec.defines({"block_size_x": 64, "tile": 2}, spec.problem(None))
    source = source_with_defines(spec.code, defines)
    head = source.splitlines()[:9]
    assert head == [
        "#define grid_size_x 8",
        "#define grid_size_y 1",
        "#define grid_size_z 1",
        "#define block_size_x 64",
        "#define block_size_y 1",
        "#define block_size_z 1",
        "#define tile 2",
        "#define kernel_tuner 1",
        "#line 1",
    ]
    assert source.endswith(spec.code)


def test_cache_key_is_one_per_source_defines_and_options():
    defines = {"block_size_x": 64, "tile": 2}
    key = cache_key("code", defines, ["--use_fast_math"])
    assert key == cache_key("code", dict(defines), ("--use_fast_math",))
    others = [
        cache_key("code ", defines, ["--use_fast_math"]),
        cache_key("code", {"block_size_x": 64, "tile": 4}, ["--use_fast_math"]),
        cache_key("code", {"tile": 2, "block_size_x": 64}, ["--use_fast_math"]),  # another source text
        cache_key("code", defines, []),
        cache_key("code", defines, ["--use_fast_math", "-lineinfo"]),
    ]
    assert len({key, *others}) == 6


def test_first_error_line():
    log = 'kern.cu(3): warning: unused\nkern.cu(7): error: identifier "x" is undefined\n1 error detected'
    assert first_error_line(log) == 'kern.cu(7): error: identifier "x" is undefined'
    assert first_error_line("\n\nsomething odd\n") == "something odd"
    assert first_error_line("") == "compilation failed"


class CountingBuild:
    """NVRTC's stand-in: records each source it compiles; a source holding 'broken' fails like NVRTC."""

    def __init__(self):
        self.sources: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, source: str):
        with self.lock:
            self.sources.append(source)
        if "broken" in source:
            raise RuntimeError("kern.cu(2): error: expected a ';'\n1 error detected")
        return ("module", f"function:{source}")


def test_each_key_compiles_once_ahead_or_when_needed():
    build = CountingBuild()
    compiler = Compiler(build, workers=3)
    items = [(f"k{i}", f"source {i}") for i in range(10)]
    assert compiler.ahead(items) == 10
    assert compiler.ahead(items[:5]) == 0  # queued already
    for key, source in items:
        compiled, first = compiler.get(key, source)
        assert compiled.ok and compiled.function == f"function:{source}" and first
        assert compiler.get(key, source) == (compiled, False)  # counted once
    assert compiler.ahead(items) == 0  # compiled already
    compiled, first = compiler.get("k99", "source 99")  # never queued: compiled now
    assert first and compiled.ok
    assert sorted(build.sources) == sorted([s for _, s in items] + ["source 99"])
    compiler.close()


def test_without_workers_nothing_is_queued_and_errors_are_rows():
    build = CountingBuild()
    compiler = Compiler(build, workers=0)
    assert compiler.ahead([("a", "x")]) == 0 and build.sources == []
    compiled, first = compiler.get("b", "broken source")
    assert first and not compiled.ok
    assert compiled.error == "kern.cu(2): error: expected a ';'"
    assert compiler.get("b", "broken source")[0] is compiled
    assert build.sources == ["broken source"]
