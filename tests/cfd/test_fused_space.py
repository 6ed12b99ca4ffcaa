"""The fused launch space (issue 16) on the CPU: constraints, reasons for invalid tiles, the contract."""

from __future__ import annotations

import pytest

from launchtune.kernels.cfd.fused_space import (
    FUSION_LEVELS,
    DeviceLimits,
    fused_violations,
    stage_shared_bytes,
    tile_of,
)
from launchtune.kernels.cfd.workload import make_workload

SIZE = (104, 32)
LIMITS = DeviceLimits()


def _cfg(fusion: int, **tile: int) -> dict[str, int]:
    return {"fusion": fusion, **{f"tile.{k}": v for k, v in tile.items()}}


def test_shared_bytes_counts_the_halo_tile_and_the_face_fluxes():
    t = tile_of(_cfg(2, block_x=32, block_y=4, cells_x=1, cells_y=1, smem=1, faces=1))
    assert stage_shared_bytes(t) == 8 * (4 * 36 * 8 + 4 * 4 * 33 + 4 * 5 * 32)
    assert stage_shared_bytes({**t, "tile.smem": 0, "tile.faces": 0}) == 0


@pytest.mark.parametrize(
    ("cfg", "needle"),
    [
        (_cfg(2, block_x=256, block_y=8), "exceeds the device limit of 1024"),
        (_cfg(1, cells_x=0), "must be >= 1"),
        (_cfg(2, block_y=0), "must be >= 1"),
        (_cfg(2, block_x=64, cells_x=4), "larger than the 104x32 grid"),
        (_cfg(7), "fusion=7 is not one of"),
        (_cfg(2, block_x=16, faces=2), "whole warps"),
    ],
)
def test_bad_tiles_are_invalid_with_a_reason(cfg, needle):
    problems = fused_violations(cfg, SIZE, LIMITS)
    assert any(needle in p for p in problems), problems


def test_shared_memory_over_the_limit_is_invalid_only_for_the_stage_level():
    tile = dict(block_x=64, block_y=16, cells_x=4, cells_y=4, smem=1, faces=1)
    big = (4096, 4096)
    assert any("shared memory" in p for p in fused_violations(_cfg(2, **tile), big, LIMITS))
    assert fused_violations(_cfg(1, **tile), big, LIMITS) == []  # directional uses no shared memory
    assert fused_violations(_cfg(2, **tile), big, DeviceLimits(max_shared_per_block=10**7)) == []


def test_seven_kernel_level_ignores_the_tile():
    assert fused_violations(_cfg(0, block_x=256, block_y=16, cells_x=0), SIZE, LIMITS) == []


def test_space_constraints_match_the_rules_and_samples_are_valid():
    w = make_workload("inlet", SIZE, "numpy", space="fused")
    sp = w.space()
    assert sp.default["fusion"] == 0 and sp.is_valid(sp.default)
    assert [p.name for p in sp.params][0] == "fusion" and len(FUSION_LEVELS) == len(sp["fusion"].values)
    samples = sp.sample(300, seed=3)
    assert {c["fusion"] for c in samples} == {0, 1, 2}
    for c in samples:
        assert fused_violations(c, SIZE, w.solver.device_limits) == []
    too_big = {**sp.default, "fusion": 2, "tile.block_x": 256, "tile.block_y": 8}
    assert not sp.is_valid(too_big)
    assert any("1024 threads" in p for p in sp.violations(too_big))


def test_workload_check_rejects_with_a_reason_instead_of_crashing():
    w = make_workload("inlet", SIZE, "numpy", space="fused")
    d = w.space().default
    for bad, needle in (
        ({**d, "fusion": 2, "tile.block_x": 256, "tile.block_y": 16}, "4096 threads"),
        ({**d, "fusion": 1, "tile.cells_x": 0}, "must be >= 1"),
    ):
        c = w.check(bad)
        assert not c.ok and needle in c.reason
    with pytest.raises(ValueError, match="must be >= 1"):
        w.solver.set_config({**d, "fusion": 1, "tile.cells_y": 0})


def test_fused_configurations_run_on_numpy_with_the_same_answer_and_columns():
    # On the CPU a fused level runs the reference (the same arithmetic), so the check must pass and the timing
    # carries every kernel column of the fused space plus the compile time (none on numpy).
    w = make_workload("inlet", SIZE, "numpy", space="fused")
    sp = w.space()
    cfg = next(c for c in sp.sample(50, seed=1) if c["fusion"] == 2)
    assert w.check(cfg).ok
    t = w.run(cfg, repeats=1)
    assert set(t.kernels) == set(w.describe()["kernels"]) and t.total > 0
    assert t.extra["compile_ms"] == 0.0


def test_paper_and_wide_spaces_are_unchanged():
    w = make_workload("inlet", SIZE, "numpy", space="paper")
    assert len(w.space().names) == 14 and "fusion" not in w.space().names
    assert w.describe()["kernels"] == list(w.kernel_names) and len(w.kernel_names) == 7


def test_compiled_register_limits_make_a_block_invalid_with_the_kernel_named():
    # what the solver passes on a GPU once every variant is compiled: here stage_fused at 96 registers
    def compiled(level, tile):
        return [("stage_fused", 640, 96)] if level == "stage" else [("xi_face", 1024, 64)]

    big = (3328, 1024)
    cfg = _cfg(2, block_x=128, block_y=8)
    assert fused_violations(cfg, big, LIMITS) == []
    problems = fused_violations(cfg, big, LIMITS, compiled)
    assert problems and "stage_fused" in problems[0] and "640" in problems[0]
    assert fused_violations(_cfg(1, block_x=128, block_y=8), big, LIMITS, compiled) == []


def test_the_fused_space_names_what_each_level_leaves_unused():
    from launchtune.kernels.cfd.fused_space import TILE_VALUES

    space = make_workload("inlet", SIZE, "numpy", space="fused").space()
    rules = {(r.when, r.values): set(r.params) for r in space.inactive}
    launches = {n for n in space.names if n.endswith((".blocks", ".threads"))}
    assert len(launches) == 14 and not any(n.startswith("tile.") for n in launches)
    assert rules == {
        ("fusion", (1, 2)): launches,
        ("fusion", (0,)): set(TILE_VALUES),
        ("fusion", (1,)): {"tile.smem", "tile.faces"},
    }
    assert all(set(r.params) <= set(space.names) for r in space.inactive)


def test_variant_options_change_the_arithmetic_only_with_arith():
    from launchtune.kernels.cfd.fused_kernels import variant_options

    plain = variant_options(1, 2, 0, 64)
    other = variant_options(1, 2, 0, 64, arith=1)
    assert "--fmad=false" in plain and "-DRECIP=0" in plain  # the seven kernels' bits, by default
    assert "--fmad=true" in other and "--fmad=false" not in other and "-DRECIP=1" in other
    differ = ("fmad", "RECIP")
    assert [o for o in plain if not any(d in o for d in differ)] == [
        o for o in other if not any(d in o for d in differ)
    ]
    assert "-DFACES=2" in plain and "--maxrregcount=64" in plain
    assert not any("LIMITER" in o for o in plain)  # the run-time argument decides


def test_a_fixed_limiter_is_compiled_in_and_keys_the_variant():
    from launchtune.kernels.cfd.fused_kernels import variant_options
    from launchtune.kernels.cfd.physics import LIMITERS

    minmod = variant_options(1, 2, 0, 64, limiter=LIMITERS["minmod"])
    albada = variant_options(1, 2, 0, 64, limiter=LIMITERS["van_albada"])
    assert f"-DLIMITER={LIMITERS['minmod']}" in minmod and f"-DLIMITER={LIMITERS['van_albada']}" in albada
    assert [o for o in minmod if "LIMITER" not in o] == [o for o in albada if "LIMITER" not in o]


def test_relative_difference_is_per_variable_and_refuses_non_finite_states():
    import numpy as np

    from launchtune.kernels.cfd.workload import ARITH_TOL, relative_difference

    want = np.stack([np.full((3, 5), 1e5), np.full((3, 5), 2.0)])  # a pressure-like and a velocity-like field
    got = want.copy()
    got[1, 2, 3] += 4e-12  # 2e-12 of the small variable's scale: would hide under the large one's
    assert relative_difference(np, got, want) == pytest.approx(2e-12)
    assert relative_difference(np, got, want) > ARITH_TOL
    got[1, 2, 3] = want[1, 2, 3] + 1e-13
    assert relative_difference(np, got, want) <= ARITH_TOL
    got[0, 0, 0] = np.nan
    assert relative_difference(np, got, want) == float("inf")


def test_variants_of_different_fused_code_are_compiled_and_cached_apart(monkeypatch):
    # lab/cfd_kernel_ab.py compiles two revisions of fused.cu in one process: a variant of one text
    # must never be served for the other (a fake CuPy records what it was asked to compile)
    from types import SimpleNamespace

    from launchtune.kernels.cfd.fused_kernels import FUSED_FILE, FusedKernels

    compiled: list[str] = []

    class Function:
        max_threads_per_block, num_regs, local_size_bytes = 1024, 64, 0

    class RawModule:
        def __init__(self, code, options):
            compiled.append(code)

        def get_function(self, name):
            return Function()

    fake = SimpleNamespace(RawModule=RawModule)
    monkeypatch.setattr(FusedKernels, "_cache", {})  # the class-wide cache, empty for this test only
    monkeypatch.setattr(FusedKernels, "compile_ms_total", 0.0)
    tree = FusedKernels(fake, 0)
    other = FusedKernels(fake, 0, fused_code="#define STAGE_TRIAL 1\n" + FUSED_FILE.read_text())
    a, b = tree.variant(0, 1, 64, 1), other.variant(0, 1, 64, 1)
    assert a is not b and len(compiled) == 2
    assert compiled[1].startswith(compiled[0].split(FUSED_FILE.read_text())[0])  # solver.cu first, both
    assert "#define STAGE_TRIAL 1" in compiled[1] and "#define STAGE_TRIAL 1" not in compiled[0]
    assert tree.variant(0, 1, 64, 1) is a and other.variant(0, 1, 64, 1) is b and len(compiled) == 2
    assert a.key == b.key  # the variant key names the constants, the cache also the text
