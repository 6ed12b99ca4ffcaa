"""A tiny workload for pipeline tests, plugged in through the ``module:factory`` form of a spec's
``workload``.

Two "kernels" whose times are a known function of their launch parameters (plus seeded noise), one
configuration family that fails ``check()`` and one that raises like a failed launch, so every status and both
samplers are exercised in seconds on any CPU.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from launchtune.kernels.space import Constraint, Param, Space
from launchtune.kernels.workload import Check, Timing, Workload


def kernel_ms(blocks: int, threads: int, best_blocks: int, best_threads: int) -> float:
    return 1.0 + 0.3 * abs(math.log2(blocks / best_blocks)) + 0.5 * abs(threads - best_threads) / best_threads


class FakeWorkload(Workload):
    name = "fake"

    def __init__(
        self,
        case: str,
        size: str,
        backend: str,
        delay: float = 0.0,
        pid_dir: str | None = None,
        slow: Mapping[str, float] | None = None,
        fail_writes: int | None = None,
        attempts: str | None = None,
        die: bool = False,
    ):
        self.case, self.size, self.backend, self.delay = (
            case,
            tuple(int(s) for s in str(size).split("x")),
            backend,
            delay,
        )
        # ``slow``: Dask worker name -> factor on ``delay``, a card slower than its neighbour
        if fail_writes:
            _fail_parquet_writes(int(fail_writes), attempts)
        self.slow = dict(slow or {})
        self.die = die  # every run kills its worker process (a card whose driver takes the process down)
        if pid_dir:
            Path(pid_dir).mkdir(parents=True, exist_ok=True)
            (Path(pid_dir) / f"{os.getpid()}.pid").write_text(str(os.getpid()))
        self._space = Space(
            params=(
                Param("a.blocks", (1, 2, 4, 8)),
                Param("a.threads", (32, 64, 128)),
                Param("b.blocks", (1, 2, 4)),
                Param("b.threads", (32, 64)),
            ),
            default={"a.blocks": 3, "a.threads": 32, "b.blocks": 2, "b.threads": 32},
            constraints=(
                Constraint("a: blocks x threads <= 512", lambda c: c["a.blocks"] * c["a.threads"] <= 512),
            ),
            name="fake",
        )  # a.blocks=3 is off its list, like the CFD default (one thread per cell), to catch mixed configs
        self._rng = np.random.default_rng(0)

    def space(self) -> Space:
        return self._space

    def check(self, config: Mapping[str, int]) -> Check:
        if config["a.blocks"] == 8 and config["b.threads"] == 64:
            return Check(False, "max |error| 1e-2 > 1e-12 (simulated race)")
        return Check(True)

    def run(self, config: Mapping[str, int], repeats: int) -> Timing:
        if self.die:
            os.kill(os.getpid(), signal.SIGKILL)
        if config["a.blocks"] == 1 and config["b.blocks"] == 1:
            raise RuntimeError("simulated launch failure: too many resources requested")
        if self.delay:
            time.sleep(self.delay * self.slow.get(_worker_name(), 1.0))
        a = kernel_ms(config["a.blocks"], config["a.threads"], 4, 64) * (
            1 + 0.01 * self._rng.standard_normal()
        )
        b = kernel_ms(config["b.blocks"], config["b.threads"], 2, 64) * (
            1 + 0.01 * self._rng.standard_normal()
        )
        return Timing(kernels={"a": a, "b": b}, total=a + b + 0.2, repeats=repeats)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "case": self.case, "size": self.size, "kernels": ["a", "b"]}


def _fail_parquet_writes(code: int, attempts: str | None) -> None:
    """Fault injection: every shard's Parquet write in this process fails with ``OSError(code)``, as on a
    read-only, full or forbidden folder (the tests run as root, where chmod does not forbid anything).
    Each attempt appends a line to ``attempts``, so a test can count how often a batch was tried. Other
    writes (the plan's, where one device measures in the sweep's own process) go through."""
    import pyarrow.parquet as pq

    original = pq.write_table

    def write_table(table, where, *args, **kwargs):
        if "shard-" not in str(where):
            return original(table, where, *args, **kwargs)
        if attempts:
            with open(attempts, "a") as f:
                f.write(f"{where}\n")
        raise OSError(code, os.strerror(code), str(where))

    pq.write_table = write_table


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return ""


def make_workload(case: str, size: str, backend: str = "numpy", **options: Any) -> FakeWorkload:
    return FakeWorkload(case, size, backend, **options)
