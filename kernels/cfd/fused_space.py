"""The launch space with fusion (issue 16): ``fusion`` x the fused kernels' 2-D tiles x the seven kernels'
launches.

``fusion`` = 0 (``none``: the seven kernels, with the paper's 14 launch parameters), 1 (``directional``:
xi_face, eta_face, cell_update) or 2 (``stage``: one kernel per Runge-Kutta stage). The ``tile.*``
parameters shape the fused kernels: block_x x block_y threads, cells_x x cells_y cells per thread, and for
``stage`` whether the state tile goes through shared memory (``smem``) and how face fluxes are shared
(``faces``: 0 each cell computes its four, 1 computed once per tile into shared memory, 2 march up columns
with eta fluxes in registers and xi fluxes passed by warp shuffles); ``maxreg`` caps registers at compile
time (0 = the compiler's choice); ``arith`` is the fused kernels' arithmetic (0: the seven kernels' own, so
their bits; 1: HLLC and the update take fewer divisions and roots and multiply-adds contract into FMAs, so
another rounding: within 1e-12 of the seven kernels' state after 100 steps, not bitwise). Parameters a
level does not use are ignored by it (a conditional space
written as a product: the samplers and surrogates see one table), so the rules below bind only where they
matter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..space import Config, Constraint, Inactive, Param, Space
from .launch_space import PAPER_BLOCKS, PAPER_THREADS, default_config
from .physics import KERNEL_NAMES

FUSION_LEVELS = ("none", "directional", "stage")
TILE_VALUES: dict[str, tuple[int, ...]] = {
    "tile.block_x": (8, 16, 32, 64, 128, 256),
    "tile.block_y": (1, 2, 4, 8, 16),
    "tile.cells_x": (1, 2, 4),
    "tile.cells_y": (1, 2, 4, 8, 16),
    "tile.smem": (0, 1),
    "tile.faces": (0, 1, 2),
    "tile.maxreg": (0, 64, 80, 96),
    "tile.arith": (0, 1),
}
TILE_DEFAULT: Config = {
    "tile.block_x": 32,
    "tile.block_y": 4,
    "tile.cells_x": 1,
    "tile.cells_y": 1,
    "tile.smem": 1,
    "tile.faces": 1,
    "tile.maxreg": 0,
    "tile.arith": 0,
}
D = 8  # bytes per double


@dataclass(frozen=True)
class DeviceLimits:
    """What a launch may ask of the device; the CPU backend uses an H100's so its space equals a GPU's."""

    max_threads_per_block: int = 1024
    max_shared_per_block: int = 232448  # the opt-in limit (227 KiB on sm_90)
    max_grid_y: int = 65535

    @classmethod
    def of_cupy(cls, cupy) -> DeviceLimits:
        a = cupy.cuda.Device().attributes
        return cls(
            int(a["MaxThreadsPerBlock"]),
            int(a.get("MaxSharedMemoryPerBlockOptin", a["MaxSharedMemoryPerBlock"])),
            int(a["MaxGridDimY"]),
        )


def fusion_level(config: Mapping[str, int]) -> str:
    v = int(config.get("fusion", 0))
    if not 0 <= v < len(FUSION_LEVELS):
        raise ValueError(f"fusion={v} is not one of 0..{len(FUSION_LEVELS) - 1} ({', '.join(FUSION_LEVELS)})")
    return FUSION_LEVELS[v]


def tile_of(config: Mapping[str, int]) -> Config:
    """The tile parameters of ``config``, defaults where absent."""
    return {k: int(config.get(k, v)) for k, v in TILE_DEFAULT.items()}


def stage_shared_bytes(tile: Mapping[str, int]) -> int:
    """Dynamic shared memory of one ``stage_fused`` block (see fused.cu)."""
    tx = tile["tile.block_x"] * tile["tile.cells_x"]
    ty = tile["tile.block_y"] * tile["tile.cells_y"]
    n = 0
    if tile["tile.smem"]:
        n += 4 * (tx + 4) * (ty + 4)
    if tile["tile.faces"] == 1:
        n += 4 * ty * (tx + 1) + 4 * (ty + 1) * tx
    return n * D


# (level, tile) -> [(kernel, its compiled variant's max threads per block, registers)], the kernels it runs
CompiledLimits = Callable[[str, Mapping[str, int]], list[tuple[str, int, int]]]


def fused_violations(
    config: Mapping[str, int],
    size: tuple[int, int],
    limits: DeviceLimits,
    compiled: CompiledLimits | None = None,
) -> list[str]:
    """Why ``config`` cannot run on a device with ``limits`` at grid ``size`` (empty when it can).

    Registers are known only once a variant is compiled: with ``compiled`` (the solver's, on a GPU) the block
    is also checked against the compiled kernels' register-limited threads per block."""
    try:
        level = fusion_level(config)
    except ValueError as e:
        return [str(e)]
    if level == "none":
        return []
    t = tile_of(config)
    bx, by, cx, cy = (t[f"tile.{k}"] for k in ("block_x", "block_y", "cells_x", "cells_y"))
    problems = []
    if bx < 1 or by < 1:
        problems.append(f"block {bx}x{by}: both block dimensions must be >= 1")
    elif bx * by > limits.max_threads_per_block:
        problems.append(
            f"block {bx}x{by} = {bx * by} threads exceeds the device limit of {limits.max_threads_per_block}"
        )
    if cx < 1 or cy < 1:
        problems.append(f"cells per thread {cx}x{cy}: each must be >= 1")
    if t["tile.maxreg"] < 0:
        problems.append(f"tile.maxreg={t['tile.maxreg']} must be 0 (no cap) or a register count")
    if problems:
        return problems
    nx, ny = size
    tx, ty = bx * cx, by * cy
    if tx > nx + 1 or ty > ny + 1:
        problems.append(f"tile {tx}x{ty} cells is larger than the {nx}x{ny} grid (most threads would idle)")
    elif -(-(ny + 1) // ty) > limits.max_grid_y:
        problems.append(
            f"{-(-(ny + 1) // ty)} tiles along j exceed the device's grid limit {limits.max_grid_y}"
        )
    if level == "stage" and t["tile.faces"] == 2 and bx % 32:
        problems.append(
            f"tile.faces=2 (march) needs whole warps along i: tile.block_x={bx} is not a multiple of 32"
        )
    if level == "stage" and t["tile.faces"] not in (0, 1, 2):
        problems.append(f"tile.faces={t['tile.faces']} is not 0, 1 or 2")
    if compiled is not None and not problems:
        for kernel, most, regs in compiled(level, t):
            if bx * by > most:
                problems.append(
                    f"{kernel}: block {bx}x{by} = {bx * by} threads exceeds the compiled variant's limit of "
                    f"{most} ({regs} registers)"
                )
    if level == "stage":
        shared = stage_shared_bytes(t)
        if shared > limits.max_shared_per_block:
            problems.append(
                f"stage tile {tx}x{ty} needs {shared} bytes of shared memory, over the device's "
                f"{limits.max_shared_per_block} per block"
            )
    return problems


def _unfused_threads_within(key: str, limit: int) -> Callable[[Mapping[str, int]], bool]:
    """A seven-kernel launch's threads within its compiled limit (fused configurations do not use it)."""
    return lambda cfg: int(cfg.get("fusion", 0)) != 0 or int(cfg[key]) <= limit


def _no_violation(
    token: str, size: tuple[int, int], limits: DeviceLimits, compiled: CompiledLimits | None
) -> Callable[[Mapping[str, int]], bool]:
    """The configuration breaks no rule whose message contains ``token``."""
    return lambda cfg: not any(token in p for p in fused_violations(cfg, size, limits, compiled))


def fused_default(domain_sizes: Mapping[str, int]) -> Config:
    """The seven kernels at one thread per cell (the untuned default), tile parameters at their defaults."""
    return {"fusion": 0, **default_config(domain_sizes), **TILE_DEFAULT}


def build_fused_space(
    domain_sizes: Mapping[str, int],
    max_threads: Mapping[str, int],
    size: tuple[int, int],
    limits: DeviceLimits,
    compiled: CompiledLimits | None = None,
) -> Space:
    params = [Param("fusion", tuple(range(len(FUSION_LEVELS))))]
    constraints = []
    for name in KERNEL_NAMES:
        params += [Param(f"{name}.blocks", PAPER_BLOCKS), Param(f"{name}.threads", PAPER_THREADS)]
        limit = int(max_threads[name])
        constraints.append(
            Constraint(
                f"{name}.threads exceeds the compiled kernel's limit of {limit} threads per block",
                _unfused_threads_within(f"{name}.threads", limit),
            )
        )
    params += [Param(k, v) for k, v in TILE_VALUES.items()]
    nx, ny = size
    rules = (  # (what a violation's message contains, the constraint's reason)
        (
            "threads exceeds",
            f"the fused block exceeds the device limit of {limits.max_threads_per_block} threads",
        ),
        ("must be >= 1", "the fused block and cells per thread must be >= 1"),
        ("larger than", f"the fused tile (block x cells per thread) is larger than the {nx}x{ny} grid"),
        ("grid limit", f"the fused tiles along j exceed the device's grid limit of {limits.max_grid_y}"),
        ("whole warps", "tile.faces=2 (march) needs tile.block_x to be a multiple of 32"),
        ("is not 0, 1 or 2", "tile.faces must be 0, 1 or 2"),
        (
            "compiled variant",
            "the fused block exceeds the compiled variant's register-limited threads per block",
        ),
        (
            "shared memory",
            f"the stage tile needs more than the device's {limits.max_shared_per_block} bytes of "
            "shared memory per block",
        ),
    )
    for token, why in rules:
        constraints.append(
            Constraint(
                why,
                _no_violation(token, size, limits, compiled),
            )
        )
    launches = tuple(p.name for p in params if p.name.endswith((".blocks", ".threads")))
    inactive = (  # fusion: 0 none, 1 directional, 2 stage (FUSION_LEVELS)
        Inactive("fusion", (1, 2), launches),  # fused levels launch their own kernels, not the seven
        Inactive("fusion", (0,), tuple(TILE_VALUES)),  # the seven kernels have no tile
        Inactive("fusion", (1,), ("tile.smem", "tile.faces")),  # one directional variant per register cap
    )
    return Space(
        tuple(params), fused_default(domain_sizes), tuple(constraints), name="cfd-fused", inactive=inactive
    )
