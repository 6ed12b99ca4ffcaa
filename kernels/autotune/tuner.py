"""One runtime autotuner per kernel, after HOOMD-blue's ``Autotuner``: a state machine small enough to prove.

The solver wraps each launch in ``begin()`` / ``end()`` and launches with ``param``. The machine advances on
the count of ``end()`` calls alone, whatever the timings are, so a scan is a fixed number of launches and a
tuner that never finishes cannot happen. Once the scan is over the best candidate by the reducer is locked and
``param`` stays put until a period runs out (``period`` launches of this kernel, ``period_s`` seconds or
``period_steps`` solver steps), then a re-scan replaces one sample per candidate and picks again.

States: ``startup`` (first full scan: ``warmup`` launches that pick nothing, then ``samples`` consecutive
samples per candidate in the given order), ``scanning`` (a re-scan: one sample per candidate), ``idle``
(locked). A sample is one launch, or the sum of ``launches_per_sample`` consecutive launches: set it to the
launches per solver step (Runge-Kutta stages) when the stages do different work, or the sample's stage mix,
not the parameters, decides the ranking (the CFD ``update`` kernel's stages differ by 57% on the H100).

Unlike HOOMD, a launch's events are read later, not waited for at ``end()``: waiting leaves the GPU idle
before every scanned launch, and then each reading includes the host's launch latency (20-40 us a launch on
the H100, more than the differences between good candidates). Only the scan's last launch waits, to pick.
Idle launches are timed one in ``time_idle`` (for the launch log and the run's kernel time): two events around
every launch cost about 2.5% of a CFD step on the H100 (3.75 against 3.66 ms). The stride is raised to the
next number coprime with ``launches_per_sample`` (100 -> 101 for 4 stages): a stride of 100 timed the same
Runge-Kutta stage every time, and the CFD ``update`` kernel's stages differ by 1.6x (on the H200 the restored
run's kernel time came out 7% above its measured step time).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from ..backend import HostStopwatch, Stopwatch

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
        time_idle: int = 1,
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
        self.samples, self.reducer, self.launches_per_sample = samples, reducer, launches_per_sample
        self.period, self.period_s, self.period_steps = periods
        self.clock = clock if clock is not None else _host_stopwatch()
        if time_idle < 0:
            raise TunerError(f"tuner {name!r}: time_idle must be >= 0 (time one idle launch in that many)")
        self.wallclock, self.warmup, self.time_idle = wallclock, warmup, int(time_idle)
        # a stride sharing a factor with the launches of a sample would time the same stage of every step
        while self.time_idle > 1 and math.gcd(self.time_idle, launches_per_sample) != 1:
            self.time_idle += 1
        self.idle_timed = self.idle_untimed = 0
        self.idle_timed_ms = 0.0
        self.step = step or (lambda: -1)
        self.log = log
        # per (candidate, sample): summed milliseconds, launches summed so far, the scan that wrote them
        shape = (len(self.candidates), samples)
        self._times, self._count, self._scan_of = np.zeros(shape), np.zeros(shape, int), np.full(shape, -1)
        self._start: Any = None
        # launches not read yet: ([param, ms, log row, idle], start, stop, (cand, sample, scan) or None)
        self._pending: deque[tuple[list, Any, Any, tuple[int, int, int] | None]] = deque()
        self.scans: list[dict[str, Any]] = []  # one record per finished scan
        self.launches = self.nonoptimal_launches = 0
        self.total_ms = self.nonoptimal_ms = 0.0
        self._best: Hashable | None = None
        self._scan_no = 0
        self._calls = 0
        self.start_scan(full=True)

    # --- the three calls a solver makes -------------------------------------------------------------------
    @property
    def param(self) -> Hashable:
        """The launch parameters to use for the next launch."""
        return self.candidates[self._element] if self.state != IDLE else self._best

    def begin(self) -> None:
        timed = self.state != IDLE or (self.time_idle and self._calls % self.time_idle == 0)
        self._start = self.clock.mark() if timed else True

    def end(self) -> None:
        if self._start is None:
            raise RuntimeError(f"tuner {self.name!r}: end() without begin()")
        start, self._start = self._start, None
        param, self.launches = self.param, self.launches + 1
        if self.state == IDLE:
            if start is not True:
                self._pending.append(
                    ([param, None, self._record(param), True], start, self.clock.mark(), None)
                )
                self._read(wait=False)
            else:
                self.idle_untimed += 1
            self._end_idle()
            return
        if not self._scan_rows:  # the scan's first launch: where it began
            self._scan_began = (self.step(), self.launches - 1)
        rec = [param, None, self._record(param), False]
        self._scan_rows.append(rec)
        target = None
        if self._warm > 0:  # warm-up launches of a startup (module load, first touch) count, but pick nothing
            self._warm -= 1
        else:
            target = (self._element, self._sample, self._scan_no)
            self._advance()
        self._pending.append((rec, start, self.clock.mark(), target))
        if self.state != IDLE and self._element == len(self.candidates):
            self._lock()
        else:
            self._read(wait=False)

    # --- control ------------------------------------------------------------------------------------------
    def start_scan(self, full: bool = False) -> None:
        """Tune again: a full startup scan, or (samples already there) replace one sample per candidate."""
        full = full or bool((self._count < self.launches_per_sample).any())
        self.state, self._scan_no = (STARTUP if full else SCANNING), self._scan_no + 1
        if full:
            self._count[:] = 0
            self._sample, self._warm = 0, self.warmup
        self._element, self._in_sample = 0, 0
        self._scan_rows: list[list[Any]] = []  # one [param, ms, record, untimed] per launch of this scan
        self._scan_began = (self.step(), self.launches)  # moved to the scan's first launch when it comes

    def lock(self, param: Hashable) -> None:
        """Use ``param`` without scanning (a tuned value restored from a table); the period still applies."""
        if param not in self.candidates:
            self.candidates.append(param)
            self._times, self._count, self._scan_of = (
                np.vstack([a, np.full((1, self.samples), fill)])
                for a, fill in ((self._times, 0.0), (self._count, 0), (self._scan_of, -1))
            )
        self._best, self.state, self._calls = param, IDLE, 0
        self._locked_at, self._locked_step = self.wallclock(), self.step()
        self.scans.append({"step": self.step(), "launches": 0, "best": param, "restored": True})

    def reject(self) -> None:
        """The launch at ``param`` failed (call instead of ``end()``): drop that candidate and carry on."""
        bad, self._start = self.param, None
        if len(self.candidates) == 1:
            raise TunerError(f"tuner {self.name!r}: every candidate failed to launch")
        self._read(wait=True)  # rare: settle every reading before the rows shift
        i = self.candidates.index(bad)
        del self.candidates[i]
        self._times, self._count, self._scan_of = (
            np.delete(a, i, axis=0) for a in (self._times, self._count, self._scan_of)
        )
        self._in_sample = 0
        if self.state == IDLE:
            self.start_scan()
        elif self._element >= len(self.candidates):
            self._lock()
        elif self.state == STARTUP:
            self._count[self._element] = 0
            self._sample = 0

    def ranking(self) -> list[tuple[Hashable, float]]:
        """Candidates with complete samples, fastest first by the reducer."""
        reduce = REDUCERS[self.reducer]
        done = (self._count == self.launches_per_sample).all(axis=1)
        ranked = [(c, reduce(t)) for c, t, ok in zip(self.candidates, self._times, done, strict=True) if ok]
        return sorted(ranked, key=lambda ct: ct[1])

    def stats(self) -> dict[str, Any]:
        """Counts for a summary; launches of a scan still open count against its best so far."""
        self.flush()
        ranked = self.ranking()
        best = self._best if self.state == IDLE else (ranked[0][0] if ranked else None)
        open_rows = (
            [] if self.state == IDLE else [(r[0], r[1]) for r in self._scan_rows if math.isfinite(r[1])]
        )
        off = [ms for p, ms in open_rows if p != best]
        finished = [s for s in self.scans if not s["restored"]]
        best_ms = ranked[0][1] / self.launches_per_sample if ranked and ranked[0][0] == best else None
        idle_ms = self.idle_timed_ms / self.idle_timed if self.idle_timed else best_ms
        if idle_ms is None and not self.idle_untimed:
            idle_ms = 0.0
        return {
            "state": self.state,
            "param": best,
            "best_ms": best_ms,  # per launch
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
            "timed_ms": self.total_ms,
            # all launches' time: the untimed idle ones at the mean of the timed idle ones (else the best's)
            "kernel_ms": self.total_ms + self.idle_untimed * idle_ms if idle_ms is not None else None,
            "idle_timed": self.idle_timed,
            "idle_untimed": self.idle_untimed,
        }

    def flush(self) -> None:
        """Read every launch's events (waits for them): call before a summary."""
        self._read(wait=True)

    # --- internals ----------------------------------------------------------------------------------------
    def _advance(self) -> None:
        self._in_sample += 1
        if self._in_sample < self.launches_per_sample:
            return
        self._in_sample = 0
        if self.state == STARTUP:
            self._sample += 1
            if self._sample < self.samples:
                return
            self._sample = 0
        self._element += 1

    def _read(self, wait: bool) -> None:
        """Read finished launches' times in launch order; ``wait`` reads them all."""
        while self._pending and (wait or getattr(self._pending[0][2], "done", True)):
            rec, start, stop, target = self._pending.popleft()
            ms = self.clock.elapsed_ms(start, stop)
            ms = ms if math.isfinite(ms) and ms >= 0 else math.inf  # a broken reading loses, never stalls
            rec[1] = ms
            self.total_ms += ms if math.isfinite(ms) else 0.0
            if self.log is not None and rec[2] is not None:
                self.log.set_time(rec[2], ms)
            if rec[3]:  # an idle launch: its time stands for the untimed ones
                self.idle_timed += 1
                self.idle_timed_ms += ms if math.isfinite(ms) else 0.0
            if target is not None:
                e, s, scan = target
                if self._scan_of[e, s] != scan:  # the first launch of this sample in this scan replaces it
                    self._times[e, s], self._count[e, s], self._scan_of[e, s] = 0.0, 0, scan
                self._times[e, s] += ms
                self._count[e, s] += 1

    def _lock(self) -> None:
        self._read(wait=True)  # the scan's last launch: wait for it, once per scan
        if self.state == SCANNING:  # the next re-scan replaces the next-oldest sample of each candidate
            self._sample = (self._sample + 1) % self.samples
        ranked = self.ranking()
        self._best = ranked[0][0] if ranked else self.candidates[0]
        for param, ms, row, _ in self._scan_rows:
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

    def _end_idle(self) -> None:
        self._calls += 1
        if (
            (self.period is not None and self._calls >= self.period)
            or (self.period_s is not None and self.wallclock() - self._locked_at >= self.period_s)
            or (self.period_steps is not None and self.step() - self._locked_step >= self.period_steps)
        ):
            self.start_scan()

    def _record(self, param: Hashable) -> int | None:
        if self.log is None:
            return None
        return self.log.add(self.name, self.step(), self.state, param, None)


def _host_stopwatch() -> Stopwatch:

    return HostStopwatch()
