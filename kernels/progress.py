"""Progress lines for long loops (a big CFD run on a CPU takes days): a line at least every ``every_s``
seconds, each saying what is done, the time so far and an estimate of the time left.

Written by hand rather than with tqdm: a tqdm bar redraws one line with carriage returns, which a log file
or a SLURM job's output keeps as one ever-growing line; these are whole lines, readable wherever stderr goes.
It lives in ``kernels`` because the kernels' own CLIs use it and ``kernels`` never imports ``pipeline``.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def duration(seconds: float) -> str:
    """``42 s``, ``12 min``, ``1.5 h``: as precise as an estimate deserves."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """Call ``update(fraction, text)`` as often as convenient (every step): it writes a line when ``every_s``
    seconds have passed since the last one, when ``force`` is set (a milestone the caller wants shown) and at
    the end (``fraction`` 1). The estimate of what is left assumes the rest goes at the pace so far."""

    def __init__(
        self,
        write: Callable[[str], object],
        every_s: float = 10.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.write, self.every_s, self.clock = write, every_s, clock
        self.start = self.last = clock()
        self.lines = 0

    def update(self, fraction: float, text: str | Callable[[], str], force: bool = False) -> bool:
        """Write ``text`` (or what the callable returns, built only when a line is due) with the time so far
        and the estimate; True where a line was written."""
        now = self.clock()
        if not (force or fraction >= 1 or now - self.last >= self.every_s):
            return False
        elapsed = now - self.start
        line = f"{text() if callable(text) else text}  {elapsed:.1f} s"
        if 0 < fraction < 1:
            line += f", about {duration(elapsed * (1 - fraction) / fraction)} left"
        self.write(line)
        self.last = now
        self.lines += 1
        return True
