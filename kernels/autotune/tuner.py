"""One runtime autotuner per kernel, after HOOMD-blue's ``Autotuner``: a state machine small enough to prove.

The solver wraps each launch in ``begin()`` / ``end()`` and launches with ``param``. While scanning, every
``end()`` times the launch (it waits for the launch to finish, as HOOMD does) and moves to the next sample; a
scan is a fixed number of ``end()`` calls whatever the timings are, so a tuner that never finishes cannot
happen. Once the scan is over the best candidate by the reducer is locked and ``param`` stays put until a
period runs out (``period`` launches of this kernel, ``period_s`` seconds or ``period_steps`` solver steps),
then a re-scan replaces one sample per candidate and picks again.

States: ``startup`` (first full scan: ``warmup`` launches that pick nothing, then ``samples`` consecutive
samples per candidate in the given order), ``scanning`` (a re-scan: one sample per candidate), ``idle``
(locked). A sample is one launch, or the sum of ``launches_per_sample`` consecutive launches: set it to the
launches per solver step (Runge-Kutta stages) when the stages do different work, or the sample's stage mix,
not the parameters, decides the ranking (seen on the H100: the CFD ``update`` kernel's stages differ by 57%).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from kernels.backend import Stopwatch

STARTUP, SCANNING, IDLE = "startup", "scanning", "idle"
REDUCERS: dict[str, Callable[[np.ndarray], float]] = {
    "median": lambda a: float(np.median(a)),
    "mean": lambda a: float(np.mean(a)),
    "max": lambda a: float(np.max(a)),
}


class TunerError(ValueError):
    """A tuner built with arguments that cannot work (no candidates, even median samples, zero period)."""


class Autotuner:
    """Picks the fastest of ``candidates`` for one kernel while the real run goes on."""

    def __init__(
        self,
        name: str,
        candidates: Sequence[Hashable],
        samples: int = 5,
        period: int | None = None,
        period_s: float | None = 300.0,
        period_steps: int | None = None,
        reducer: str = "median",
        clock: Stopwatch | None = None,
        wallclock: Callable[[], float] = time.monotonic,
        warmup: int = 1,
        launches_per_sample: int = 1,
        time_idle: bool = True,
        step: Callable[[], int] | None = None,
        log: Any = None,
    ):
        self.name = name
        self.candidates = list(dict.fromkeys(candidates))  # order kept, repeats dropped
        if not self.candidates:
            raise TunerError(f"tuner {name!r}: no candidates to choose from")
        if samples < 1 or (reducer == "median" and samples % 2 == 0):
            raise TunerError(f"tuner {name!r}: samples must be >= 1 and odd for the median (got {samples})")
        if reducer not in REDUCERS:
            raise TunerError(
                f"tuner {name!r}: reducer must be one of {', '.join(REDUCERS)} (got {reducer!r})"
            )
        periods = (period, period_s, period_steps)
        if any(p is not None and p <= 0 for p in periods) or warmup < 0 or launches_per_sample < 1:
            raise TunerError(
                f"tuner {name!r}: period, period_s, period_steps and launches_per_sample must be positive, "
                "warmup >= 0"
            )
        self.samples, self.reducer = samples, reducer
        self.period, self.period_s, self.period_steps = periods
        self.clock = clock if clock is not None else _host_stopwatch()
        self.wallclock, self.warmup, self.time_idle = wallclock, warmup, time_idle
        self.launches_per_sample = launches_per_sample
        self.step = step or (lambda: -1)
        self.log = log
        self.context: dict[str, Any] = {}  # gpu class, size, ... for the tuning table (set by attach_tuners)
        self._times = np.full((len(self.candidates), samples), np.nan)
        self._start: Any = None
        # idle launches whose events are not read yet: (log row, start mark, stop mark)
        self._pending: deque[tuple[int | None, Any, Any]] = deque()
        self.scans: list[dict[str, Any]] = []  # one record per finished scan
        self.launches = self.nonoptimal_launches = 0
        self.total_ms = self.nonoptimal_ms = 0.0
        self._best: Hashable | None = None
        self.start_scan(full=True)

    # --- the three calls a solver makes -------------------------------------------------------------------
    @property
    def param(self) -> Hashable:
        """The launch parameters to use for the next launch."""
        return self.candidates[self._element] if self.state != IDLE else self._best

    def begin(self) -> None:
        if self.state != IDLE or self.time_idle:
            self._start = self.clock.mark()
        else:
            self._start = True

    def end(self) -> None:
        if self._start is None:
            raise RuntimeError(f"tuner {self.name!r}: end() without begin()")
        start, self._start = self._start, None
        param, self.launches = self.param, self.launches + 1
        if self.state == IDLE:
            self._end_idle(start, param)
            return
        ms = self.clock.elapsed_ms(start, self.clock.mark())
        ms = ms if math.isfinite(ms) and ms >= 0 else math.inf  # a broken reading loses, it never stalls
        if not self._scan_rows:  # the scan's first launch: where it began
            self._scan_began = (self.step(), self.launches - 1)
        self._scan_rows.append((param, ms, self._record(param, ms)))
        if self._warm > 0:  # warm-up launches of a startup (module load, first touch) count, but pick nothing
            self._warm -= 1
            return
        # A sample may span several consecutive launches: a kernel launched once per Runge-Kutta stage does
        # different work in different stages, and k consecutive launches cover each of k stages exactly once.
        self._acc, self._acc_n = self._acc + ms, self._acc_n + 1
        if self._acc_n < self.launches_per_sample:
            return
        ms, self._acc, self._acc_n = self._acc, 0.0, 0
        self._times[self._element, self._sample] = ms
        if self.state == STARTUP:
            self._sample += 1
            if self._sample < self.samples:
                return
            self._sample = 0
        self._element += 1
        if self._element == len(self.candidates):
            self._lock()

    # --- control ------------------------------------------------------------------------------------------
    def start_scan(self, full: bool = False) -> None:
        """Tune again: a full startup scan, or (samples already there) replace one sample per candidate."""
        full = full or bool(np.isnan(self._times).any())
        self.state = STARTUP if full else SCANNING
        if full:
            self._times[:] = np.nan
            self._sample, self._warm = 0, self.warmup
        self._element, self._scan_rows, self._acc, self._acc_n = 0, [], 0.0, 0
        self._scan_began = (self.step(), self.launches)  # moved to the scan's first launch when it comes

    def lock(self, param: Hashable) -> None:
        """Use ``param`` without scanning (a tuned value restored from a table); the period still applies."""
        if param not in self.candidates:
            self.candidates.append(param)
            self._times = np.vstack([self._times, np.full((1, self.samples), np.nan)])
        self._best, self.state, self._calls = param, IDLE, 0
        self._locked_at, self._locked_step = self.wallclock(), self.step()
        self.scans.append({"step": self.step(), "launches": 0, "best": param, "restored": True})

    def reject(self) -> None:
        """The launch at ``param`` failed (call instead of ``end()``): drop that candidate and carry on."""
        bad, self._start = self.param, None
        if len(self.candidates) == 1:
            raise TunerError(f"tuner {self.name!r}: every candidate failed to launch")
        i = self.candidates.index(bad)
        del self.candidates[i]
        self._times = np.delete(self._times, i, axis=0)
        if self.state == IDLE:
            self.start_scan()
        elif self._element >= len(self.candidates):
            self._lock()
        elif self.state == STARTUP:
            self._sample = 0
        self._acc, self._acc_n = 0.0, 0

    def ranking(self) -> list[tuple[Hashable, float]]:
        """Candidates with complete samples, fastest first by the reducer."""
        reduce = REDUCERS[self.reducer]
        done = [
            (c, reduce(t)) for c, t in zip(self.candidates, self._times, strict=True) if not np.isnan(t).any()
        ]
        return sorted(done, key=lambda ct: ct[1])

    def stats(self) -> dict[str, Any]:
        """Counts for a summary; launches of a scan still open count against its best so far."""
        self.flush()
        ranked = self.ranking()
        best = self._best if self.state == IDLE else (ranked[0][0] if ranked else None)
        open_rows = (
            [] if self.state == IDLE else [(p, ms) for p, ms, _ in self._scan_rows if math.isfinite(ms)]
        )
        off = [ms for p, ms in open_rows if p != best]
        finished = [s for s in self.scans if not s["restored"]]
        best_ms = ranked[0][1] if ranked and ranked[0][0] == best else None
        return {
            "state": self.state,
            "param": best,
            "best_ms": best_ms,
            "candidates": len(self.candidates),
            "launches": self.launches,
            "scans_finished": len(finished),
            "restored": any(s["restored"] for s in self.scans),
            "tuned_at_step": finished[0]["step"] if finished else None,
            "first_scan_launches": finished[0]["launches"] if finished else None,
            "first_scan_steps": finished[0]["step"] - finished[0]["began_step"] + 1 if finished else None,
            "nonoptimal_launches": self.nonoptimal_launches + len(off),
            "nonoptimal_ms": self.nonoptimal_ms + sum(off),
            # what those launches cost beyond running at the best: the time tuning actually lost
            "excess_ms": self.nonoptimal_ms + sum(off) - (self.nonoptimal_launches + len(off)) * best_ms
            if best_ms is not None
            else None,
            "timed_ms": self.total_ms + sum(ms for _, ms in open_rows),
        }

    def flush(self) -> None:
        """Read every idle launch's events (waits for them): call before a summary."""
        for row, start, stop in self._pending:
            self._idle_time(row, self.clock.elapsed_ms(start, stop))
        self._pending.clear()

    # --- internals ----------------------------------------------------------------------------------------
    def _lock(self) -> None:
        if self.state == SCANNING:  # the next re-scan replaces the next-oldest sample of each candidate
            self._sample = (self._sample + 1) % self.samples
        ranked = self.ranking()
        self._best = ranked[0][0] if ranked else self.candidates[0]
        for param, ms, row in self._scan_rows:
            self.total_ms += ms if math.isfinite(ms) else 0.0
            if param != self._best:
                self.nonoptimal_launches += 1
                self.nonoptimal_ms += ms if math.isfinite(ms) else 0.0
                if self.log is not None and row is not None:
                    self.log.mark_nonoptimal(row)
        began_step, began_launch = self._scan_began
        self.scans.append(
            {
                "step": self.step(),
                "began_step": began_step,
                "launches": self.launches - began_launch,
                "best": self._best,
                "best_ms": ranked[0][1] if ranked else None,
                "restored": False,
            }
        )
        self.state, self._calls, self._scan_rows = IDLE, 0, []
        self._locked_at, self._locked_step = self.wallclock(), self.step()

    def _end_idle(self, start: Any, param: Hashable) -> None:
        if self.time_idle:
            stop = self.clock.mark()
            row = self._record(param, None)
            self._pending.append((row, start, stop))
            while self._pending and getattr(self._pending[0][2], "done", True):  # events already complete
                row, a, b = self._pending.popleft()
                self._idle_time(row, self.clock.elapsed_ms(a, b))
        self._calls += 1
        if (
            (self.period is not None and self._calls >= self.period)
            or (self.period_s is not None and self.wallclock() - self._locked_at >= self.period_s)
            or (self.period_steps is not None and self.step() - self._locked_step >= self.period_steps)
        ):
            self.start_scan()

    def _idle_time(self, row: int | None, ms: float) -> None:
        self.total_ms += ms
        if self.log is not None and row is not None:
            self.log.set_time(row, ms)

    def _record(self, param: Hashable, ms: float | None) -> int | None:
        if self.log is None:
            return None
        return self.log.add(self.name, self.step(), self.state, param, ms)


def _host_stopwatch() -> Stopwatch:
    from kernels.backend import HostStopwatch

    return HostStopwatch()
