"""``autotune(...)`` on the CPU: a fake clock and fake kernels whose cost and answer each test chooses.

The fake compiler reads a candidate's ``#define`` lines, as NVRTC would, and returns a kernel that moves the
fake clock by the cost the test gave that configuration and computes (or miscomputes) its answer in numpy.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from launchtune.kernels.autotune import IDLE, AutotuneError, TableError, autotune
from launchtune.kernels.autotune.cache import FORMAT, PickCache, cache_dir
from launchtune.kernels.kernel.errors import SpecError

SOURCE = """
extern "C" __global__ void scale(float *out, const float *in, int n) {
    int i = blockIdx.x * block_size_x * tile + threadIdx.x;
    for (int t = 0; t < tile; t++, i += block_size_x) if (i < n) out[i] = 2.0f * in[i];
}
"""
PARAMS = {"block_size_x": [32, 64, 128, 256], "tile": [1, 2, 4]}
# the fastest is (128, 2); the default (32, 1) the slowest
COST = {
    (b, t): 1.0 + abs(b - 128) / 64 + abs(t - 2) * 0.3 for b in PARAMS["block_size_x"] for t in PARAMS["tile"]
}
BEST = {"block_size_x": 128, "tile": 2}


class FakeClock:
    def __init__(self) -> None:
        self.now_ms = 0.0

    def mark(self) -> float:
        return self.now_ms

    def elapsed_ms(self, start: float, stop: float) -> float:
        return stop - start

    def seconds(self) -> float:
        return self.now_ms / 1e3


class FakeCompiler:
    """``build(source)`` -> (module, kernel); ``wrong`` configurations compute 3x instead of 2x."""

    def __init__(self, clock: FakeClock, wrong=(), in_place: bool = False):
        self.clock, self.wrong, self.in_place = clock, set(wrong), in_place
        self.built: list[dict[str, int]] = []
        self.launched: list[tuple[int, int]] = []

    def __call__(self, source: str):
        defines = {k: int(v) for k, v in re.findall(r"#define (\w+) (-?\d+)", source)}
        self.built.append(defines)
        cfg = (defines["block_size_x"], defines["tile"])

        def kernel(grid, block, args, shared_mem=0):
            assert block == (cfg[0], 1, 1)
            assert grid[0] == -(-args[-1] // (cfg[0] * cfg[1]))  # grid_div_x: block_size_x * tile
            self.launched.append(cfg)
            self.clock.now_ms += COST[cfg]
            factor = 3.0 if cfg in self.wrong else 2.0
            if self.in_place:
                args[0][...] += 1.0
            else:
                args[0][...] = factor * args[1]

        return None, kernel


def make(tmp_path, clock=None, compiler=None, **kw):
    clock = clock or FakeClock()
    compiler = compiler or FakeCompiler(clock)
    kw.setdefault("cache", tmp_path / "cache.json")
    kw.setdefault("scan", None)
    kw.setdefault("tune_params", PARAMS)
    tuned = autotune(
        source=SOURCE,
        kernel_name="scale",
        grid_div_x=["block_size_x", "tile"],
        problem_size=lambda out, inp, n: (n,),
        key=lambda out, inp, n: (out.shape, str(out.dtype)),
        gpu_class="h100",
        clock=clock,
        wallclock=clock.seconds,
        build=compiler,
        compile_workers=0,
        **kw,
    )
    return tuned, clock, compiler


def call(tuned, n_calls, n=1000):
    out, inp = np.zeros(n, np.float32), np.arange(n, dtype=np.float32)
    for _ in range(n_calls):
        tuned(out, inp, n)
    return out, inp


def test_scans_from_scratch_locks_the_fastest_and_stays():
    tuned, _, compiler = make(tmp_path=Path("/nonexistent"), cache=False)
    out, inp = call(tuned, 1 + 3 * 12)  # warm-up + 3 samples of each of the 12 configurations
    (s,) = tuned.stats().values()
    assert s["state"] == IDLE and s["config"] == BEST
    assert s["first_scan_launches"] == 37 and s["locked_at_launch"] == 37
    assert compiler.launched[0] == (32, 1)  # the default is scanned first
    before = len(compiler.launched)
    call(tuned, 50)
    assert compiler.launched[before:] == [(128, 2)] * 50
    np.testing.assert_array_equal(out, 2 * inp)
    s = tuned.stats()[next(iter(tuned.stats()))]
    assert s["nonoptimal_launches"] == 1 + 3 * 11  # the warm-up launch was at the default, not the best


def test_a_new_key_tunes_once_and_the_first_key_returns_to_its_pick_without_tuning(tmp_path):
    tuned, _, compiler = make(tmp_path, cache=False)
    call(tuned, 40, n=1000)
    first = dict(tuned.stats())
    call(tuned, 40, n=500)  # a new shape: one scan for it
    assert len(tuned.stats()) == 2
    launched = len(compiler.launched)
    call(tuned, 30, n=1000)  # back: the pick at once, no scan
    assert compiler.launched[launched:] == [(128, 2)] * 30
    stats = tuned.stats()
    key_a = next(k for k in stats if "1000" in k)
    key_b = next(k for k in stats if "500" in k)
    assert stats[key_a]["scans_finished"] == 1 == stats[key_b]["scans_finished"]
    assert stats[key_a]["first_scan_launches"] == first[key_a]["first_scan_launches"] == 37
    assert stats[key_a]["nonoptimal_launches"] == first[key_a]["nonoptimal_launches"]
    assert stats[key_b]["state"] == IDLE and stats[key_b]["config"] == BEST


def test_seeded_from_a_sweep_table_scans_its_picks_for_this_class_at_the_nearest_size(tmp_path):
    def entry(cls, size, best, others):
        return {
            "gpu_class": cls,
            "size": size,
            "source": "sweep",
            "best": best,
            "candidates": [{"config": c, "ms": 1.0} for c in [best, *others]],
        }

    table = {
        "format": "launchtune-tuning-table",
        "version": 1,
        "entries": [
            entry("a100", "1000", {"block_size_x": 32, "tile": 4}, []),
            entry("h100", "100000000", {"block_size_x": 256, "tile": 4}, []),  # far from n=1000
            entry("h100", "2000", BEST, [{"block_size_x": 64, "tile": 2}, {"block_size_x": 256, "tile": 1}]),
        ],
    }
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "tuning_table.json").write_text(json.dumps(table))
    tuned, _, compiler = make(tmp_path, table=tmp_path / "sweep", cache=False)
    call(tuned, 1 + 3 * 3 + 5)
    (s,) = tuned.stats().values()
    assert s["config"] == BEST and s["locked_at_launch"] == 10  # three candidates: 1 + 3 x 3 launches
    assert set(compiler.launched) == {(128, 2), (64, 2), (256, 1)}
    assert s["seed"].startswith("sweep h100 2000")


def test_a_tuned_runs_table_entry_at_this_size_locks_at_once_as_for_the_cfd_solver(tmp_path):
    """A ``runtime`` entry (what a tuned run writes: ``Tuning.table_entry``) at exactly the call's size is a
    remembered pick, locked without a scan; at another size it only seeds the scan."""
    pick = {"block_size_x": 64, "tile": 4}
    runtime = {"gpu_class": "h100", "size": "1000", "source": "runtime", "best": pick, "candidates": [pick]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"format": "launchtune-tuning-table", "version": 1, "entries": [runtime]}))
    tuned, _, compiler = make(tmp_path, table=path, cache=False)
    call(tuned, 5)
    (s,) = tuned.stats().values()
    assert (
        s["state"] == IDLE and s["config"] == pick and s["seed"].startswith("locked from runtime h100 1000")
    )
    assert compiler.launched == [(64, 4)] * 5 and s["nonoptimal_launches"] == 0
    tuned, _, compiler = make(tmp_path, table=path, cache=False)
    call(tuned, 5, n=500)
    (s,) = tuned.stats().values()
    assert not s["restored"] and s["seed"].startswith("runtime h100 1000")
    assert s["first_scan_launches"] == 1 + 3  # its one candidate scanned: a warm-up and three samples


def test_a_table_without_this_class_scans_from_scratch_and_says_so(tmp_path):
    table = {
        "format": "launchtune-tuning-table",
        "version": 1,
        "entries": [{"gpu_class": "a100", "size": "1"}],
    }
    (tmp_path / "t.json").write_text(json.dumps(table))
    tuned, _, _ = make(tmp_path, table=tmp_path / "t.json", cache=False, scan=5, seed=3)
    call(tuned, 1 + 3 * 5)
    (s,) = tuned.stats().values()
    assert (
        s["seed"].startswith("none: ")
        and "h100" in s["seed"]
        and "5 configurations from scratch" in s["seed"]
    )
    assert s["candidates"] == 5 and s["state"] == IDLE


def test_verify_rejects_a_candidate_that_computes_another_answer_and_never_uses_it(tmp_path):
    clock = FakeClock()
    wrong = (128, 2)  # the fastest, but wrong
    compiler = FakeCompiler(clock, wrong=[wrong])
    tuned, _, _ = make(tmp_path, clock=clock, compiler=compiler, verify=True, cache=False)
    n = 1000
    out, inp = np.zeros(n, np.float32), np.arange(n, dtype=np.float32)
    for _ in range(60):
        out[...] = -1
        tuned(out, inp, n)
        np.testing.assert_array_equal(out, 2 * inp)  # every call's answer is right, scanning or not
    (s,) = tuned.stats().values()
    assert s["state"] == IDLE and s["config"] != {"block_size_x": 128, "tile": 2}
    (rejected,) = s["rejected"]
    assert rejected["config"] == {"block_size_x": 128, "tile": 2}
    assert (
        rejected["reason"].startswith("argument 0[1] = 3, the default gives 2")
        and "999 elements differ" in rejected["reason"]
    )
    assert s["verify_launches"] == 2 * 11  # default + candidate, once for each of the 11 non-default ones


def test_in_place_arguments_are_restored_around_verify_launches(tmp_path):
    # The kernel adds 1 in place: each call must add exactly 1, though verify launches twice more a candidate.
    clock = FakeClock()
    tuned, _, compiler = make(
        tmp_path,
        clock=clock,
        compiler=FakeCompiler(clock, in_place=True),
        verify=True,
        restore=[0],
        cache=False,
    )
    out, _ = call(tuned, 50)
    np.testing.assert_array_equal(out, np.full(1000, 50.0, np.float32))
    assert len(compiler.launched) == 50 + 2 * 11
    # the same without restore: the verify launches leak into the answer (and the check sees a difference)
    clock = FakeClock()
    tuned, _, _ = make(
        tmp_path, clock=clock, compiler=FakeCompiler(clock, in_place=True), verify=True, cache=False
    )
    out, _ = call(tuned, 50)
    assert out[0] != 50.0


def test_the_pick_is_written_to_the_cache_and_a_second_run_tunes_nothing(tmp_path):
    path = tmp_path / "cache" / "autotune.json"
    tuned, _, _ = make(tmp_path, cache=path)
    call(tuned, 40)
    doc = json.loads(path.read_text())
    assert doc["format"] == FORMAT
    (pick,) = doc["picks"].values()
    assert (
        pick["config"] == BEST and pick["kernel"] == "scale" and pick["ms"] == pytest.approx(COST[(128, 2)])
    )
    (entry_key,) = doc["picks"]
    assert entry_key.startswith("h100|")

    again, _, compiler = make(tmp_path, cache=path)  # a second run of the program
    call(again, 200)
    (s,) = again.stats().values()
    assert s["cache"] == "hit" and s["scans_finished"] == 0 and s["nonoptimal_launches"] == 0
    assert set(compiler.launched) == {(128, 2)} and len(compiler.built) == 1

    # another GPU class, or an edited kernel, does not take this pick
    other, _, _ = make(tmp_path, cache=path, tune_params={**PARAMS, "tile": [1, 2]})
    call(other, 1)
    assert next(iter(other.stats().values()))["cache"] == "miss"

    assert again.clear_cache() == 1
    fresh, _, _ = make(tmp_path, cache=path)
    call(fresh, 1)
    assert next(iter(fresh.stats().values()))["cache"] == "miss"


def test_cache_false_writes_nothing_and_the_default_cache_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "launchtune"
    tuned, _, _ = make(tmp_path, cache=False)
    call(tuned, 40)
    assert not (tmp_path / "xdg").exists()
    tuned, _, _ = make(tmp_path, cache=True)
    call(tuned, 40)
    assert (tmp_path / "xdg" / "launchtune" / "autotune.json").is_file()
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert cache_dir() == Path.home() / ".cache" / "launchtune"


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe\x00",
        b'{"format": "something else", "picks": {}}',
        b"[1, 2]",
        b'{"format": "' + FORMAT.encode() + b'", "picks": {"x": 1}}',
    ],  # fmt: skip
)
def test_a_corrupt_cache_is_one_warning_and_a_fresh_tuning(tmp_path, content):
    path = tmp_path / "autotune.json"
    path.write_bytes(content)
    tuned, _, _ = make(tmp_path, cache=path)
    with pytest.warns(RuntimeWarning, match=str(path.name)) as record:
        call(tuned, 40)
    assert len(record) == 1
    (s,) = tuned.stats().values()
    assert s["cache"] == "miss" and s["scans_finished"] == 1 and s["config"] == BEST
    key_text = next(iter(tuned.keys.values())).key_text
    if b"picks" in content and b"x" in content:  # a cache with a malformed entry: the pick joins it
        assert json.loads(path.read_text())["picks"]["x"] == 1
        assert PickCache(path).get("h100", tuned.identity, key_text)["config"] == BEST
        return
    # not a cache: left as it is (it may be the user's), the pick kept beside it, where the warning says
    assert path.read_bytes() == content
    assert str(PickCache(path).kept) in str(record[0].message)
    with pytest.warns(RuntimeWarning, match="left as it is"):
        assert PickCache(path).get("h100", tuned.identity, key_text)["config"] == BEST


def test_a_compiled_kernel_tunes_its_launch_only(tmp_path):
    clock = FakeClock()
    seen = []

    class RawKernelLike:
        name, code = "scale", SOURCE

        def __call__(self, grid, block, args, shared_mem=0):
            seen.append((grid, block))
            clock.now_ms += {64: 2.0, 128: 1.0, 256: 1.5}[block[0]]
            args[0][...] = 2 * args[1]

    tuned = autotune(
        RawKernelLike(),
        tune_params={"block_size_x": [64, 128, 256]},
        problem_size=(1000,),
        scan=None,
        clock=clock,
        wallclock=clock.seconds,
        gpu_class="h100",
        cache=False,
    )
    call(tuned, 20)
    assert next(iter(tuned.stats().values()))["config"] == {"block_size_x": 128}
    assert seen[-1] == ((8, 1, 1), (128, 1, 1))


def test_bad_input_is_one_clear_error(tmp_path):
    base = {
        "source": SOURCE,
        "kernel_name": "scale",
        "tune_params": PARAMS,
        "problem_size": (1000,),
        "build": FakeCompiler(FakeClock()),
        "gpu_class": "h100",
        "clock": FakeClock(),
        "cache": False,
    }
    with pytest.raises(SpecError, match=r"autotune: restrictions\[0\]: .*unknown name 'block_size_y'"):
        autotune(**{**base, "restrictions": ["block_size_x * block_size_y <= 1024"]})
    with pytest.raises(SpecError, match=r"autotune: default: unknown parameter 'threads'"):
        autotune(**{**base, "default": {"threads": 64}})
    with pytest.raises(AutotuneError, match=r"restrictions\[0\]: a Python function"):
        autotune(**{**base, "restrictions": [lambda p: p["block_size_x"] <= 1024]})
    with pytest.raises(
        SpecError, match=r"restrictions\[0\]: .*call of .* is not allowed; the only calls are min"
    ):
        autotune(**{**base, "restrictions": ["__import__('os').system('true')"]})
    with pytest.raises(AutotuneError, match=r"autotune: key: expected a function .* got \(1, 2\)"):
        autotune(**{**base, "key": (1, 2)})
    with pytest.raises(SpecError, match=r"kernel_name: no '__global__ \.\.\. scal\('"):
        autotune(**{**base, "kernel_name": "scal"})
    with pytest.raises(AutotuneError, match=r"tune_params.tile: a compiled kernel can tune only its launch"):
        k = type("K", (), {"name": "scale", "code": SOURCE, "__call__": lambda *a, **k: None})()
        autotune(k, tune_params=PARAMS, problem_size=(10,), gpu_class="h100", clock=FakeClock(), cache=False)
    with pytest.raises(AutotuneError, match="give exactly one of kernel="):
        autotune(tune_params=PARAMS)
    with pytest.raises(AutotuneError, match="samples: must be >= 1 and odd"):
        autotune(**{**base, "samples": 4})
    with pytest.raises(AutotuneError, match="table: no such sweep folder"):
        autotune(**{**base, "table": tmp_path / "missing"})
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "tuning_table.json").write_text("{not json")
    with pytest.raises(TableError, match=r"sweep/tuning_table.json: not a readable JSON tuning table"):
        autotune(**{**base, "table": tmp_path / "sweep"})
    tuned = autotune(**{**base, "key": lambda out, inp, n: [n]})
    with pytest.raises(AutotuneError, match=r"key returned list \[1000\], which is not hashable"):
        call(tuned, 1)


def test_a_kernel_spec_works_as_it_is_and_the_problem_size_comes_from_the_arguments(tmp_path):
    spec = Path(__file__).resolve().parents[2] / "kernels" / "examples" / "convolution.yaml"
    built = []

    def build(source):
        built.append(dict(re.findall(r"#define (\w+) (-?\d+)", source)))
        return None, lambda grid, block, args, shared_mem=0: None

    clock = FakeClock()
    tuned = autotune(
        spec=spec, build=build, gpu_class="h100", clock=clock, cache=False, scan=3, compile_workers=0
    )
    out = np.zeros((64, 128), np.float32)
    inp = np.zeros((64 + 14, 128 + 14), np.float32)
    tuned(out, inp, np.zeros((15, 15), np.float32), np.int32(128), np.int32(64))
    (s,) = tuned.stats().values()
    assert s["problem_size"] == [128, 64, 1]
    assert built[0]["grid_size_x"] == "8" and built[0]["grid_size_y"] == "64"  # the default: 16 x 1 threads
    assert tuned.constants == {"d_filter": 2}


def test_the_worked_example_refuses_bad_input_with_one_line(capsys):
    from launchtune.kernels.examples.autotune_convolution import main, parse_sizes

    assert parse_sizes("4096x2048:30,64x64:2") == [(4096, 2048, 30), (64, 64, 2)]
    assert main(["--sizes", "4096x4096"]) == 2
    assert capsys.readouterr().err == "error: --sizes: '4096x4096' is not WIDTHxHEIGHT:LAUNCHES\n"
    assert main(["--table", "no/such/sweep"]) == 2
    assert "--table: no such sweep folder" in capsys.readouterr().err


def test_the_runtime_tuner_is_part_of_the_public_api():
    import launchtune

    assert launchtune.autotune is autotune and launchtune.AutotuneError is AutotuneError
    assert "autotune" in dir(launchtune)
