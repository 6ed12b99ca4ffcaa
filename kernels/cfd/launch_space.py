"""The launch space of the seven kernels: Table 3 of Xue & Roy (``paper``) and a wider one (``wide``)."""

from __future__ import annotations

from collections.abc import Mapping

from ..space import Config, Constraint, Param, Space
from .physics import KERNEL_NAMES

PAPER_BLOCKS = tuple(range(100, 1001, 100))
PAPER_THREADS = tuple(range(32, 385, 32))
WIDE_THREADS = tuple(range(32, 1025, 32))
DEFAULT_THREADS = 256
PRESETS = ("paper", "wide")


def default_config(domain_sizes: Mapping[str, int]) -> Config:
    """What a careful CuPy user writes without tuning: one thread per cell (or face), 256 threads per
    block."""
    config = {}
    for name in KERNEL_NAMES:
        config[f"{name}.blocks"] = -(-domain_sizes[name] // DEFAULT_THREADS)
        config[f"{name}.threads"] = DEFAULT_THREADS
    return config


def wide_blocks(cells: int) -> tuple[int, ...]:
    """The paper's 100..1000 plus 1024 * 2^k up to the first count that gives every cell its own thread at
    32 threads per block: the range where one-thread-per-cell launches (and their neighbours) live."""
    values = list(PAPER_BLOCKS)
    b = 1024
    while True:
        values.append(b)
        if b * 32 >= cells:
            break
        b *= 2
    return tuple(values)


def _threads_at_most(name: str, limit: int) -> Constraint:
    key = f"{name}.threads"
    return Constraint(
        f"{key} exceeds the compiled kernel's limit of {limit} threads per block",
        lambda cfg: int(cfg[key]) <= limit,
        lambda cols: cols[key] <= limit,
        (key,),
    )


def build_space(
    domain_sizes: Mapping[str, int], max_threads: Mapping[str, int], preset: str = "paper"
) -> Space:
    if preset not in PRESETS:
        raise ValueError(f"unknown space preset {preset!r}: choose one of {', '.join(PRESETS)}")
    params = []
    constraints = []
    biggest = max(domain_sizes.values())
    for name in KERNEL_NAMES:
        if preset == "paper":
            blocks, threads = PAPER_BLOCKS, PAPER_THREADS
        else:
            blocks, threads = wide_blocks(biggest), WIDE_THREADS
        params += [Param(f"{name}.blocks", blocks), Param(f"{name}.threads", threads)]
        limit = int(max_threads[name])
        constraints.append(_threads_at_most(name, limit))
    return Space(tuple(params), default_config(domain_sizes), tuple(constraints), name=f"cfd-{preset}")
