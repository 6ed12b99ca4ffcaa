"""Progress lines of long loops (kernels/progress.py), driven by a fake clock: when a line is written and
what it says is left."""

from __future__ import annotations

import pytest

from launchtune.kernels.progress import Progress, duration


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_line_at_least_every_ten_seconds_with_the_time_left_at_the_pace_so_far():
    clock, lines = Clock(), []
    meter = Progress(lines.append, every_s=10, clock=clock)
    built = []
    for step in range(1, 1001):  # 3 s a step: 3,000 s in all
        clock.now += 3.0
        meter.update(step / 1000, lambda step=step: built.append(step) or f"step {step}/1000")
    # a line each time 10 s have passed (every 4th step of 3 s: 12 s), the last one saying no estimate
    assert len(lines) == meter.lines == 250 and built == list(range(4, 1001, 4))  # text built only then
    assert lines[0] == "step 4/1000  12.0 s, about 50 min left"  # 996 steps of 3 s: 2,988 s
    assert lines[125] == "step 504/1000  1512.0 s, about 25 min left"
    assert lines[-1] == "step 1000/1000  3000.0 s"


def test_milestones_are_forced_and_a_fast_loop_writes_nothing_else():
    clock, lines = Clock(), []
    meter = Progress(lines.append, every_s=10, clock=clock)
    for step in range(1, 101):
        clock.now += 0.02
        meter.update(step / 100, f"step {step}", force=step % 10 == 0)
    assert [line.split()[1] for line in lines] == [str(s) for s in range(10, 101, 10)]
    assert lines[4] == "step 50  1.0 s, about 1 s left"


@pytest.mark.parametrize("seconds, text", [(42, "42 s"), (89.4, "89 s"), (720, "12 min"), (5400, "1.5 h")])
def test_durations_are_as_precise_as_an_estimate_deserves(seconds, text):
    assert duration(seconds) == text
