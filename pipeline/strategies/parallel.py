"""A live search over several workers, replayed: ``parallel`` measurements in flight, each answer arriving
after its own (recorded) time, in the order they would finish on the cards.

What a live sweep's strategy meets on ``parallel`` GPUs (``pipeline.sweep.search``) is proposals answered out
of order and a model refitted before its last few proposals are back. Replaying that on recorded data costs
no GPU and is deterministic: the clock is virtual (a measurement takes its answered time, a failed one the
dataset's median time; the strategy's own thinking takes none), so ``launchtune strategies
--parallel K`` scores what batching costs a strategy against the sequential run (``--parallel 1``, the same
numbers as without it).
"""

from __future__ import annotations

import heapq

import numpy as np

from launchtune.kernels.space import Config

from .base import Answer
from .replay import ReplayWorkload


class SimulatedAnswers:
    """``width`` virtual workers measuring a replayed dataset; answers arrive by virtual finishing time."""

    def __init__(self, workload: ReplayWorkload, repeats: int, width: int) -> None:
        if width < 1:
            raise ValueError("SimulatedAnswers: width must be at least 1")
        self.workload, self.repeats, self.width = workload, repeats, int(width)
        times = workload._time[np.isfinite(workload._time)]
        self.failed_ms = float(np.median(times)) if len(times) else 1.0
        self.now = 0.0
        self._running: list[tuple[float, int, Answer]] = []  # (finish, order, answer), a heap

    def submit(self, order: int, config: Config, round: int) -> None:
        timing = self.workload.run(config, self.repeats)
        ok = timing.extra.get("status", "ok") == "ok"
        t = float(timing.total) if ok else float("inf")
        took = t if np.isfinite(t) else self.failed_ms
        heapq.heappush(self._running, (self.now + took, order, Answer(order, t, dict(timing.kernels))))

    def collect(self, event: int, block: bool) -> list[Answer]:
        if block and self._running:
            self.now = max(self.now, self._running[0][0])
        done = []
        while self._running and self._running[0][0] <= self.now:
            done.append(heapq.heappop(self._running)[2])
        return done

    def recorded(self, event: int) -> bool:
        return False
