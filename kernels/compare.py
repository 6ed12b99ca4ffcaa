"""Is B faster than A? The one place where a speed-up gets its uncertainty and its verdict word.

Two configurations are timed in interleaved rounds (A B, then B A, ...: each round runs both, the order
alternating so that drift and warm-up hit both alike). Each round gives one ratio, time(B) / time(A); the
reported ratio is the median of the rounds' ratios and its 95% interval is a seeded bootstrap of that median
(``scipy.stats.bootstrap``, percentile method). The verdict is decided by the interval alone: "faster" when it
lies wholly below 1, "slower" when wholly above, otherwise "no measurable difference".

It lives in ``kernels`` because the runtime autotuner and the benchmarks use it as well as the pipeline, and
``kernels`` never imports ``pipeline``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000
FASTER, SLOWER, SAME = "faster", "slower", "no measurable difference"


@dataclass(frozen=True)
class Comparison:
    """time(B) / time(A): the median over interleaved rounds, its interval, and what the interval decides."""

    ratio: float
    low: float
    high: float
    verdict: str
    rounds: int
    confidence: float = CONFIDENCE

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self, digits: int = 3) -> str:
        """``0.652x [0.648, 0.655] (95%, 11 rounds): faster``."""
        pct = round(100 * self.confidence)
        return (
            f"{self.ratio:.{digits}f}x [{self.low:.{digits}f}, {self.high:.{digits}f}] "
            f"({pct}%, {self.rounds} rounds): {self.verdict}"
        )


def verdict(low: float, high: float) -> str:
    """The word an interval of time(B) / time(A) decides."""
    if high < 1.0:
        return FASTER
    if low > 1.0:
        return SLOWER
    return SAME


def compare(
    a_ms: Sequence[float], b_ms: Sequence[float], seed: int = 0, confidence: float = CONFIDENCE
) -> Comparison:
    """Compare paired per-round times of A (the baseline) and B; non-finite ratios are dropped."""
    a = np.asarray(a_ms, dtype=float)
    b = np.asarray(b_ms, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired rounds needed: {a.shape} times of A against {b.shape} of B")
    with np.errstate(divide="ignore", invalid="ignore"):
        r = b / a
    r = r[np.isfinite(r) & (r > 0)]
    if r.size == 0:
        raise ValueError("no round with a finite positive ratio to compare")
    mid = float(np.median(r))
    if r.size < 3 or np.ptp(r) == 0.0:
        # too few rounds to resample, or every round agrees: the interval is the spread of the rounds
        low, high = float(r.min()), float(r.max())
    else:
        low, high = bootstrap_interval(r, np.median, confidence, seed)
        low, high = min(low, mid), max(high, mid)
    return Comparison(mid, low, high, verdict(low, high), int(r.size), confidence)


def bootstrap_interval(
    sample: np.ndarray, statistic: Callable[..., Any], confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """The seeded percentile-bootstrap interval of ``statistic`` over one sample (scipy.stats.bootstrap)."""
    import inspect

    from scipy.stats import bootstrap

    # scipy >= 1.15 names the generator ``rng``; older ones (a cluster's module stack) ``random_state``
    gen_key = "rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state"
    res = bootstrap(
        (np.asarray(sample, dtype=float),),
        statistic,
        confidence_level=confidence,
        n_resamples=RESAMPLES,
        method="percentile",
        **{gen_key: np.random.default_rng(seed)},
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def interleaved(
    time_a: Callable[[], float], time_b: Callable[[], float], rounds: int
) -> tuple[list[float], list[float]]:
    """Time A and B in ``rounds`` interleaved rounds (A B, B A, A B, ...); returns the two lists of times."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    a, b = [], []
    for i in range(rounds):
        if i % 2 == 0:
            a.append(time_a())
            b.append(time_b())
        else:
            b.append(time_b())
            a.append(time_a())
    return a, b
