"""The tuner's state machine under a fake clock: every launch's cost is chosen by the test."""

from __future__ import annotations

import math

import numpy as np
import pytest

from launchtune.kernels.autotune import IDLE, SCANNING, STARTUP, Autotuner, LaunchLog, TunerError


class FakeClock:
    """A stopwatch whose time moves only when the test says a launch took ``ms``."""

    def __init__(self) -> None:
        self.now_ms = 0.0

    def mark(self) -> float:
        return self.now_ms

    def elapsed_ms(self, start: float, stop: float) -> float:
        return stop - start

    def seconds(self) -> float:
        return self.now_ms / 1e3


def make(cands, clock=None, **kw):
    clock = clock or FakeClock()
    kw.setdefault("period_s", None)
    return Autotuner("k", cands, clock=clock, wallclock=clock.seconds, **kw), clock


def drive(tuner, clock, cost, n):
    """Launch ``n`` times; ``cost(param)`` is the launch's milliseconds. Returns the params used."""
    used = []
    for _ in range(n):
        p = tuner.param
        used.append(p)
        tuner.begin()
        clock.now_ms += cost(p)
        tuner.end()
    return used


def test_startup_scans_in_order_with_samples_consecutive_launches_each():
    tuner, clock = make(["a", "b", "c"], samples=3, warmup=1)
    assert tuner.state == STARTUP
    used = drive(tuner, clock, {"a": 3.0, "b": 1.0, "c": 2.0}.get, 1 + 3 * 3)
    assert used == ["a"] + ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    assert tuner.state == IDLE and tuner.param == "b"
    assert drive(tuner, clock, lambda p: 1.0, 50) == ["b"] * 50
    assert tuner.scans[0]["launches"] == 10


def test_warmup_launch_is_not_a_sample():
    # The first launch (module load) is 100x slower: with warmup it cannot spoil candidate a, even for "max".
    costs = iter([100.0] + [1.0] * 3 + [2.0] * 3)
    tuner, clock = make(["a", "b"], samples=3, reducer="max", warmup=1)
    drive(tuner, clock, lambda p: next(costs), 7)
    assert tuner.param == "a"
    assert [ms for _, ms in tuner.ranking()] == [1.0, 2.0]


@pytest.mark.parametrize("reducer, expected", [("median", "a"), ("mean", "b"), ("max", "c")])
def test_reducer_decides_between_noisy_candidates(reducer, expected):
    # a: [1, 1, 10] median 1 mean 4 max 10; b: [2, 2, 5] median 2 mean 3 max 5; c: [4, 4, 4] 4 each.
    series = {"a": iter([1.0, 1.0, 10.0]), "b": iter([2.0, 2.0, 5.0]), "c": iter([4.0, 4.0, 4.0])}
    tuner, clock = make(["a", "b", "c"], samples=3, reducer=reducer, warmup=0)
    drive(tuner, clock, lambda p: next(series[p]), 9)
    assert tuner.state == IDLE and tuner.param == expected


def test_rescan_after_period_replaces_one_sample_per_candidate():
    tuner, clock = make(["a", "b"], samples=3, period=4, warmup=0)
    cost = {"a": 1.0, "b": 2.0}
    drive(tuner, clock, cost.get, 6)
    assert tuner.param == "a"
    assert drive(tuner, clock, cost.get, 4) == ["a"] * 4  # the period: 4 idle launches, then a re-scan
    assert tuner.state == SCANNING
    cost["a"] = 5.0  # conditions change: a is now slower than b
    assert drive(tuner, clock, cost.get, 2) == ["a", "b"]  # one launch per candidate
    # One new sample of three: a's median is still 1, so it stays (HOOMD's rule, slow to react to a blip)
    assert tuner.state == IDLE and tuner.param == "a"
    drive(tuner, clock, cost.get, 4 + 2)
    assert tuner.param == "b"  # second re-scan: a's samples [5, 5, 1], median 5 > 2
    assert len(tuner.scans) == 3


def test_rescan_after_period_in_seconds():
    tuner, clock = make(["a", "b"], samples=1, period_s=2.0, warmup=0)
    drive(tuner, clock, {"a": 1.0, "b": 2.0}.get, 2)
    assert tuner.state == IDLE
    drive(tuner, clock, lambda p: 100.0, 19)  # 1.9 s
    assert tuner.state == IDLE
    drive(tuner, clock, lambda p: 100.0, 1)
    assert tuner.state == SCANNING


def test_no_period_means_locked_for_good():
    tuner, clock = make(["a", "b"], samples=1, period=None, period_s=None, warmup=0)
    drive(tuner, clock, {"a": 2.0, "b": 1.0}.get, 2)
    assert set(drive(tuner, clock, lambda p: 1e6, 1000)) == {"b"}
    assert tuner.state == IDLE


@pytest.mark.parametrize("seed", range(20))
def test_a_scan_always_ends_within_its_launch_count(seed):
    """Whatever the clock reads (NaN, inf, negative, huge, equal), the scan ends after a fixed count."""
    rng = np.random.default_rng(seed)
    n, samples, warmup = int(rng.integers(1, 12)), int(rng.choice([1, 3, 5, 7])), int(rng.integers(0, 3))
    weird = [math.nan, math.inf, -1.0, 1e300, 0.0, 1.0]
    reducer = str(rng.choice(["median", "max"]))
    tuner, clock = make(list(range(n)), samples=samples, warmup=warmup, reducer=reducer)

    class Weird(FakeClock):
        def elapsed_ms(self, start, stop):
            return float(rng.choice(weird))

    tuner.clock = Weird()
    launches = 0
    while tuner.state != IDLE:
        tuner.begin()
        if len(tuner.candidates) > 1 and rng.random() < 0.05:
            tuner.reject()  # now and then a launch fails
        else:
            tuner.end()
            launches += 1
        assert launches <= warmup + n * samples
    assert tuner.param in range(n)


def test_rejected_candidates_are_dropped_and_scan_still_ends():
    tuner, clock = make(["a", "bad", "c"], samples=1, warmup=0)
    drive(tuner, clock, lambda p: 2.0, 1)
    assert tuner.param == "bad"
    tuner.begin()
    tuner.reject()  # the launch at "bad" raised
    assert tuner.candidates == ["a", "c"] and tuner.param == "c"
    drive(tuner, clock, {"c": 1.0}.get, 1)
    assert tuner.state == IDLE and tuner.param == "c"
    tuner.reject()  # the locked one fails later: re-scan over what is left
    assert tuner.candidates == ["a"]
    with pytest.raises(TunerError, match="every candidate failed"):
        tuner.reject()


def test_lock_restores_a_tuned_value_without_scanning_then_full_scan_after_period():
    tuner, clock = make(["a", "b"], samples=1, period=3, warmup=0)
    tuner.lock("z")
    assert tuner.state == IDLE and tuner.param == "z" and tuner.candidates == ["a", "b", "z"]
    assert drive(tuner, clock, lambda p: 1.0, 3) == ["z"] * 3
    assert tuner.state == STARTUP  # no samples to refresh: a full scan
    drive(tuner, clock, {"a": 3.0, "b": 2.0, "z": 1.0}.get, 3)
    assert tuner.param == "z"


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"candidates": []}, "no candidates"),
        ({"samples": 4}, "odd"),
        ({"samples": 0}, "samples"),
        ({"reducer": "min"}, "reducer"),
        ({"period": 0}, "period"),
        ({"period_s": 0.0}, "period"),
        ({"period_steps": 0}, "period"),
        ({"launches_per_sample": 0}, "launches_per_sample"),
    ],
)
def test_bad_arguments_are_refused(kw, match):
    args = {"candidates": ["a"], **kw}
    with pytest.raises(TunerError, match=match):
        Autotuner("k", **args)


def test_even_samples_are_fine_for_mean():
    assert Autotuner("k", ["a"], samples=4, reducer="mean").samples == 4


def test_end_without_begin_is_a_bug():
    tuner, _ = make(["a"])
    with pytest.raises(RuntimeError, match="without begin"):
        tuner.end()


def test_repeated_candidates_count_once():
    tuner, clock = make(["a", "b", "a"], samples=1, warmup=0)
    assert tuner.candidates == ["a", "b"]


def test_stats_and_log_count_nonoptimal_launches_and_time():
    log = LaunchLog(param_names=("v",))
    steps = iter(range(10_000))
    tuner, clock = make([1, 2, 3], samples=3, warmup=1, log=log, step=lambda: next(steps))
    cost = {1: 2.0, 2: 1.0, 3: 4.0}.get
    drive(tuner, clock, cost, 1 + 9 + 90)
    s = tuner.stats()
    # warm-up at 1 plus 3 samples of 1 and 3 of 3 ran at non-optimal parameters
    assert s["param"] == 2 and s["nonoptimal_launches"] == 7
    assert s["nonoptimal_ms"] == pytest.approx(4 * 2.0 + 3 * 4.0)
    assert s["excess_ms"] == pytest.approx(4 * 2.0 + 3 * 4.0 - 7 * 1.0)
    assert s["timed_ms"] == pytest.approx(4 * 2.0 + 3 * 1.0 + 3 * 4.0 + 90 * 1.0)
    assert s["launches"] == 100 and s["scans_finished"] == 1 and s["first_scan_launches"] == 10
    assert len(log) == 100 and sum(r[6] for r in log.rows) == 7
    assert all(r[5] is not None for r in log.rows)  # idle launches timed too


def test_stats_of_an_unfinished_scan_count_against_best_so_far():
    tuner, clock = make([1, 2, 3], samples=1, warmup=0)
    drive(tuner, clock, {1: 2.0, 2: 1.0, 3: 4.0}.get, 2)
    s = tuner.stats()
    assert s["state"] == STARTUP and s["param"] == 2 and s["nonoptimal_launches"] == 1
    assert s["tuned_at_step"] is None


def test_idle_launches_untimed_when_asked():
    tuner, clock = make(["a"], samples=1, warmup=0, time_idle=False)
    drive(tuner, clock, lambda p: 1.0, 11)
    s = tuner.stats()
    assert s["timed_ms"] == pytest.approx(1.0) and s["idle_untimed"] == 10
    assert s["kernel_ms"] == pytest.approx(11.0)  # untimed idle launches counted at the best's time


def test_one_idle_launch_in_n_is_timed_and_stands_for_the_rest():
    log = LaunchLog(param_names=("v",))
    tuner, clock = make(["a"], samples=1, warmup=0, time_idle=3, log=log)
    drive(tuner, clock, lambda p: 1.0, 1)
    drive(tuner, clock, lambda p: 2.0, 9)  # idle launches 0, 3, 6 are timed
    s = tuner.stats()
    assert s["idle_timed"] == 3 and s["idle_untimed"] == 6 and len(log) == 1 + 3
    assert s["kernel_ms"] == pytest.approx(1.0 + 9 * 2.0)


@pytest.mark.parametrize("time_idle, stride", [(4, 5), (100, 101), (3, 3), (1, 1)])
def test_idle_timing_goes_through_every_stage_of_a_step(time_idle, stride):
    """A stride sharing a factor with the launches per step timed one Runge-Kutta stage only (100 with 4
    stages on the H200: the update kernel's time came from its second stage alone); it is made coprime."""
    stage_cost = [1.6, 1.0, 1.0, 1.3]
    tuner, clock = make(["a"], samples=1, warmup=0, launches_per_sample=4, time_idle=time_idle)
    assert tuner.time_idle == stride
    n = [0]

    def cost(p):
        n[0] += 1
        return stage_cost[(n[0] - 1) % 4]

    steps = 4 * stride * 5
    drive(tuner, clock, cost, 4 * steps)  # one scan sample (a whole step), then idle
    s = tuner.stats()
    assert s["idle_timed"] == -(-(4 * steps - 4) // stride)
    assert s["kernel_ms"] == pytest.approx(sum(stage_cost) * steps, rel=0.01)


def test_rejecting_the_last_candidate_of_a_scan_locks_on_the_rest():
    tuner, clock = make(["a", "b", "bad"], samples=3, warmup=0)
    drive(tuner, clock, {"a": 2.0, "b": 1.0}.get, 6)
    tuner.begin()
    tuner.reject()
    assert tuner.state == IDLE and tuner.param == "b" and tuner.candidates == ["a", "b"]


def test_rescan_after_period_in_solver_steps():
    step = [0]
    tuner, clock = make(["a", "b"], samples=1, warmup=0, period_steps=3, step=lambda: step[0])
    drive(tuner, clock, {"a": 1.0, "b": 2.0}.get, 2)
    assert tuner.state == IDLE
    for _ in range(2):  # two launches a step: the period counts steps, not launches
        step[0] += 1
        drive(tuner, clock, lambda p: 1.0, 2)
    assert tuner.state == IDLE
    step[0] += 1
    drive(tuner, clock, lambda p: 1.0, 1)
    assert tuner.state == SCANNING


def test_a_sample_can_span_launches_in_order():
    tuner, clock = make(["a", "b"], samples=1, warmup=1, launches_per_sample=3)
    used = drive(tuner, clock, {"a": 1.0, "b": 2.0}.get, 1 + 2 * 3)
    assert used == ["a"] + ["a"] * 3 + ["b"] * 3
    assert tuner.state == IDLE and [ms for _, ms in tuner.ranking()] == [3.0, 6.0]


def test_stage_dependent_work_needs_samples_that_span_a_step():
    """A kernel launched once per Runge-Kutta stage, each stage costing a different amount (as the CFD update
    kernel on the H100): one-launch samples rank candidates by stage mix, whole-step samples by speed."""
    stage_cost = [1.5, 1.0, 1.2, 1.4]
    quality = {"a": 1.0, "b": 1.0, "best": 0.9, "c": 1.0}

    def pick(launches_per_sample):
        tuner, clock = make(list(quality), samples=5, warmup=1, launches_per_sample=launches_per_sample)
        n = [0]

        def cost(p):
            n[0] += 1
            return stage_cost[(n[0] - 1) % 4] * quality[p]

        while tuner.state != IDLE:
            drive(tuner, clock, cost, 1)
        return tuner.param

    assert pick(1) in ("a", "b")  # "best" sampled stages 3,0,1,2,3: median 1.26; a and b 1.2
    assert pick(4) == "best"


class LateClock(FakeClock):
    """Marks are events that finish only when the test says so (a GPU running behind the host)."""

    class Mark:
        def __init__(self, t):
            self.t, self.done = t, False

    def __init__(self):
        super().__init__()
        self.marks = []

    def mark(self):
        self.marks.append(self.Mark(self.now_ms))
        return self.marks[-1]

    def elapsed_ms(self, start, stop):
        stop.done = True  # reading waits for the event
        return stop.t - start.t


def test_scan_never_waits_for_a_launch_except_the_last():
    log = LaunchLog(param_names=("v",))
    tuner, clock = make([1, 2, 3], clock=LateClock(), samples=1, warmup=0, log=log)
    drive(tuner, clock, {1: 3.0, 2: 1.0, 3: 2.0}.get, 2)
    assert tuner.state == STARTUP and [r[5] for r in log.rows] == [None, None]  # nothing read yet
    clock.marks[1].done = True  # the first launch finished on the device: read on the next end()
    drive(tuner, clock, {3: 2.0}.get, 1)  # the scan's last launch: waits, reads all, picks
    assert tuner.state == IDLE and tuner.param == 2
    assert [r[5] for r in log.rows] == [3.0, 1.0, 2.0]
    drive(tuner, clock, lambda p: 1.0, 3)
    assert [r[5] for r in log.rows[3:]] == [None, None, None]  # idle launches read late too
    assert tuner.stats()["timed_ms"] == pytest.approx(9.0)  # stats() reads them all
