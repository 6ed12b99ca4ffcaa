"""A workload that answers from a recorded dataset instead of a device.

It implements the same interface as a live workload (``space``, ``run``, ``check``, ``describe``), so every
search strategy can be scored offline against thousands of recorded configurations, and then run unchanged on
a GPU.

One statistic throughout (issue 17): the **true value** of a recorded configuration is the mean of its
recorded repeated times (Kernel Tuner records that mean as ``time``; where no repeats were recorded, the
recorded time itself). A ``run`` returns the mean of ``repeats`` draws (with replacement) from those
repeats, so a measurement is noisy, as on the device, and its expectation is exactly the true value; a
strategy's pick is scored by its true value (:meth:`ReplayWorkload.recorded_time`) and the optimum is the
best true value. The noise of the k-th measurement of a row is drawn from a generator seeded by (seed, row,
k), so a configuration answers the same values under the same seed whatever order a strategy (ours or Kernel
Tuner's) measures in.
(The median of draws scored against the recorded mean ranked noise: on cards whose repeats ramp up or carry
outliers, measuring every configuration scored 1.02.)

A separable dataset (the CFD step: per-kernel times, each kernel launched by its own parameters) can also
answer configurations nobody recorded: the step time is estimated as the sum of each kernel's recorded time
under its own parameters plus the recorded overhead (total minus the kernels' sum). Such answers say so
(``Timing.extra["source"] == "additive"``).

A recorded sweep holds one day's times; live, a search also meets what changes between that day and its own
(issue 53). :class:`NoiseModel`, fitted from live records (``benchmarks/noisy_replay.py``), adds it to a
replay: each recorded configuration's **persistent** offset, drawn once per seed (the configuration's live
time against its recorded one), and per **measurement** noise beyond the recorded repeats' (with a share of
outliers), drawn per visit. ``ReplayWorkload(..., noise=model)`` answers with both; ``live_time`` is then a
configuration's true value under that seed (recorded time times its offset), what a live re-measure sees."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from launchtune.kernels.space import Config, Constraint, Inactive, Param, Space
from launchtune.kernels.workload import Check, Timing, Workload

from ..store.datasets import STATUS, TIME, Dataset


class ReplayError(KeyError):
    """A configuration the dataset cannot answer (never recorded and not estimable)."""


def true_values(frame) -> np.ndarray:
    """The true value of each row: the mean of its recorded repeats, else its recorded time (NaN if failed).

    Kernel Tuner's ``time`` is that mean; the Hub's A6000 cache is the exception (1,624 of 3,889 entries
    differ from the mean of their ``times`` by up to 1.9%), and the repeats are what a measurement draws from.
    """
    time = frame[TIME].to_numpy(dtype=float).copy()
    if "times" in frame:
        for i, t in enumerate(frame["times"]):
            if len(t) and np.isfinite(time[i]):
                time[i] = float(np.mean(t))
    return time


# streams of a noisy replay's draws, apart from the recorded repeats' (seeded by (seed, row, visit))
_PERSISTENT, _MEASUREMENT = 1, 2


@dataclass(frozen=True)
class NoiseModel:
    """Live noise on top of a replay, multiplicative, in log units: ``persistent`` is the standard deviation
    of a configuration's offset (drawn once per seed and row), ``measurement`` that of each measurement's
    extra noise (drawn per visit); ``outlier_share`` of measurements are further off by a factor
    ``1 + outlier_scale``, half of them slower and half faster (a fast one is what misleads a search). A
    common drift of the whole card scales every answer alike and cancels in a pick's ratio: not drawn."""

    persistent: float = 0.0
    measurement: float = 0.0
    outlier_share: float = 0.0
    outlier_scale: float = 0.0

    def offset(self, seed: int, row: int) -> float:
        """Row ``row``'s persistent factor under ``seed`` (the same at every visit)."""
        if not self.persistent:
            return 1.0
        z = np.random.default_rng([seed, row, _PERSISTENT]).standard_normal()
        return float(np.exp(self.persistent * z))

    def draw(self, seed: int, row: int, visit: int) -> float:
        """The ``visit``-th measurement's own factor for row ``row`` under ``seed``."""
        rng = np.random.default_rng([seed, row, visit, _MEASUREMENT])
        z, u, side = rng.standard_normal(), rng.random(), rng.choice((-1.0, 1.0))
        far = (1.0 + self.outlier_scale) ** side if u < self.outlier_share else 1.0
        return float(np.exp(self.measurement * z)) * far

    @classmethod
    def fit(
        cls,
        offsets: Sequence[Sequence[float]],
        measurements: Sequence[Sequence[float]],
        recorded: float = 0.0,
    ) -> NoiseModel:
        """Fit from live records, ratios grouped by live call (each call has its own drift, removed as the
        group's mean log): ``offsets``, per call, recorded configurations' live re-measured time over their
        recorded time (each re-measure a mean of many rounds); ``measurements``, per call, one live
        measurement over the same configuration's re-measured time. ``recorded``: the log sd a replayed
        measurement already has from its recorded repeats, taken out of ``measurement``. Outliers: the share
        of measurement residuals beyond 3 robust standard deviations (either way), and their mean size."""

        def logs(groups: Sequence[Sequence[float]]) -> list[np.ndarray]:
            return [np.log(np.asarray(g, dtype=float)) for g in groups if len(g) > 1]

        def residuals(groups: list[np.ndarray], keep: list[np.ndarray]) -> tuple[np.ndarray, int]:
            """Each call's kept values less their mean, and the degrees of freedom left."""
            res = [g[k] - g[k].mean() for g, k in zip(groups, keep, strict=True) if k.sum() > 1]
            return (np.concatenate(res) if res else np.zeros(0)), sum(len(r) - 1 for r in res)

        # outliers: beyond 3 robust standard deviations (the MAD's) of each call's median
        measured = logs(measurements)
        spread = np.concatenate([g - np.median(g) for g in measured]) if measured else np.zeros(0)
        robust = 1.4826 * float(np.median(np.abs(spread))) if len(spread) else 0.0
        far = [np.abs(g - np.median(g)) > 3 * robust if robust else np.zeros(len(g), bool) for g in measured]
        res, dof = residuals(measured, [~f for f in far])
        sd = float(np.sqrt((res**2).sum() / max(1, dof))) if dof else 0.0
        measurement = float(np.sqrt(max(0.0, sd**2 - recorded**2)))
        outliers = np.concatenate(
            [np.zeros(0)] + [np.abs(g - np.median(g))[f] for g, f in zip(measured, far, strict=True)]
        )
        share = len(outliers) / len(spread) if len(spread) else 0.0
        scale = float(np.mean(np.expm1(outliers))) if len(outliers) else 0.0
        # a re-measure's offset also holds its own rounds' noise; what is left over is the persistent part
        off, dof = residuals(logs(offsets), [np.ones(len(g), bool) for g in logs(offsets)])
        persistent = float(np.sqrt((off**2).sum() / max(1, dof))) if len(off) else 0.0
        return cls(persistent, measurement, share, scale)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class _Additive:
    """A separable dataset's additive model: per kernel its parameters' columns in a configuration's key and
    its median recorded time under each of their settings, the overhead outside the kernels, and the recorded
    repeats' spread (each repeat over its row's mean) that an estimate's noise is drawn from."""

    cols: dict[str, list[int]]
    tables: dict[str, dict[tuple[int, ...], float]]
    overhead: float
    spread: np.ndarray


class ReplayWorkload(Workload):
    """Answers ``run(config)`` from ``dataset``; ``seed`` fixes the noise drawn from the recorded repeats (and
    ``noise``'s draws, if given: live noise on recorded rows; additive estimates answer without it)."""

    name = "replay"

    def __init__(
        self,
        dataset: Dataset,
        seed: int = 0,
        estimate_unrecorded: bool = True,
        noise: NoiseModel | None = None,
    ) -> None:
        self.dataset = dataset
        self.noise = noise
        self.case = dataset.name
        self.size: tuple[int, ...] = ()
        self.params = list(dataset.params)
        self._seed = int(seed)
        self._rng = np.random.default_rng(seed)  # additive estimates; recorded rows: measurement()
        self._visits: dict[int, int] = {}
        frame = dataset.frame
        keys = frame[self.params].to_numpy(dtype=np.int64)
        self._keys = keys
        self._row = {tuple(int(v) for v in k): i for i, k in enumerate(keys)}
        self._ok = (frame[STATUS] == "ok").to_numpy()
        self._times = list(frame["times"]) if "times" in frame else [np.empty(0)] * len(frame)
        self._time = true_values(frame)
        self._kernel_cols = dict(dataset.kernel_times)
        self._kernel_time = {k: frame[c].to_numpy(dtype=float) for k, c in self._kernel_cols.items()}
        self._additive = self._build_additive() if (estimate_unrecorded and dataset.kernels) else None
        self._estimates: dict[tuple[int, ...], tuple[float, dict[str, float]] | None] = {}
        values = [Param(p, tuple(dataset.values(p))) for p in self.params]
        if dataset.default is not None:
            default = {p: int(dataset.default[p]) for p in self.params}
        else:  # a cache has no default launch: take the first recorded working configuration
            first = int(np.flatnonzero(self._ok)[0]) if self._ok.any() else 0
            default = dict(zip(self.params, (int(v) for v in keys[first]), strict=True))
        self._space = Space(
            tuple(values),
            default,
            (Constraint("the dataset holds no record of this configuration", self.answerable),),
            name=f"replay:{dataset.name}",
            inactive=tuple(
                Inactive(when, tuple(int(v) for v in values), tuple(p for p in unused if p in self.params))
                for when, values, unused in dataset.inactive
            ),
        )

    # -------------------------------------------------------------------------------------- additive model
    def _build_additive(self) -> _Additive | None:
        """Per kernel: its median recorded time under each of its own parameter settings, and the overhead."""
        ok = self._ok
        if not ok.any():
            return None
        index = {p: i for i, p in enumerate(self.params)}
        tables: dict[str, dict[tuple[int, ...], float]] = {}
        total_kernels = np.zeros(ok.sum())
        for kernel, names in self.dataset.kernels.items():
            cols = [index[n] for n in names]
            times = self._kernel_time[kernel][ok]
            sub = self._keys[ok][:, cols]
            by: dict[tuple[int, ...], list[float]] = {}
            for key, t in zip(map(tuple, sub.tolist()), times, strict=True):
                if np.isfinite(t):
                    by.setdefault(key, []).append(float(t))
            tables[kernel] = {k: float(np.median(v)) for k, v in by.items()}
            total_kernels += np.nan_to_num(times)
        overhead = float(np.median(self._time[ok] - total_kernels))
        rel = [
            t / m for t, m in zip(self._times, self._time, strict=True) if len(t) and np.isfinite(m) and m > 0
        ]
        spread = np.concatenate(rel) if rel else np.ones(1)
        return _Additive(
            cols={k: [index[n] for n in v] for k, v in self.dataset.kernels.items()},
            tables=tables,
            overhead=overhead,
            spread=spread,
        )

    def _estimate(self, key: tuple[int, ...]) -> tuple[float, dict[str, float]] | None:
        # A sweep row asks for one configuration's estimate four times (space check, validity, check, run):
        # the last few answers are kept (issue 18: a third of a replayed row's CPU).
        if key in self._estimates:
            return self._estimates[key]
        if len(self._estimates) >= 1024:
            self._estimates.clear()
        found = self._estimates[key] = self._compute_estimate(key)
        return found

    def _compute_estimate(self, key: tuple[int, ...]) -> tuple[float, dict[str, float]] | None:
        add = self._additive
        if add is None:
            return None
        parts = {}
        for kernel, cols in add.cols.items():
            t = add.tables[kernel].get(tuple(key[c] for c in cols))
            if t is None:
                return None
            parts[kernel] = t
        return sum(parts.values()) + add.overhead, parts

    # -------------------------------------------------------------------------------------------- interface
    def _key(self, config: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(int(config[p]) for p in self.params)

    def answerable(self, config: Mapping[str, int]) -> bool:
        key = self._key(config)
        return key in self._row or self._estimate(key) is not None

    def space(self) -> Space:
        return self._space

    def candidates(self) -> list[Config]:
        """Every recorded configuration (failed ones too: a strategy learns they fail by trying them)."""
        return [dict(zip(self.params, map(int, k), strict=True)) for k in self._keys]

    def measurement(self, row: int, repeats: int, visit: int = 0) -> float:
        """What the ``visit``-th measurement of recorded ``row`` answers (no side effects): the mean of
        ``repeats`` draws from its recorded repeats under this workload's seed."""
        times = self._times[row]
        if not self._ok[row]:
            return float("inf")
        if len(times):
            rng = np.random.default_rng([self._seed, row, visit])
            drawn = float(np.mean(rng.choice(times, size=max(1, repeats))))
        else:
            drawn = float(self._time[row])
        if self.noise is None:
            return drawn
        return drawn * self.noise.offset(self._seed, row) * self.noise.draw(self._seed, row, visit)

    def run(self, config: Mapping[str, int], repeats: int = 7) -> Timing:
        key = self._key(config)
        row = self._row.get(key)
        if row is None:
            est = self._estimate(key)
            if est is None or self._additive is None:  # (an estimate comes only from the additive model)
                raise ReplayError(
                    f"{self.dataset.name}: no record of {dict(config)} and no way to estimate it"
                )
            total, parts = est
            noise = float(np.mean(self._rng.choice(self._additive.spread, size=max(1, repeats))))
            return Timing(
                {k: v * noise for k, v in parts.items()},
                total * noise,
                repeats,
                {"status": "ok", "source": "additive"},
            )
        if not self._ok[row]:
            return Timing({}, float("inf"), repeats, {"status": "failed", "source": "recorded"})
        recorded = self._time[row]
        visit = self._visits.get(row, 0)
        self._visits[row] = visit + 1
        total = self.measurement(row, repeats, visit)
        scale = total / recorded if recorded > 0 else 1.0
        kernels = {k: float(v[row]) * scale for k, v in self._kernel_time.items()}
        return Timing(kernels, total, repeats, {"status": "ok", "source": "recorded"})

    def measured_ms(self, config: Mapping[str, int]) -> float:
        """The time (ms) recorded beside the objective of a dataset ranked by another quantity (a GFLOP/s
        cache's ``time``); NaN where none was recorded (a cache without times, an unrecorded configuration):
        such a dataset's ``run`` answers the objective's cost, which is no time."""
        column = self.dataset.measures.get("time")
        row = self._row.get(self._key(config))
        if column is None or row is None or column not in self.dataset.frame:
            return float("nan")
        return float(self.dataset.frame[column].iloc[row])

    def recorded_time(self, config: Mapping[str, int]) -> tuple[float, str]:
        """The true value of ``config`` (ms; inf if it failed: the mean of its recorded repeats) and where it
        came from (``recorded``, or ``additive`` for a separable dataset's estimate of an unrecorded one)."""
        key = self._key(config)
        row = self._row.get(key)
        if row is not None:
            return (float(self._time[row]) if self._ok[row] else float("inf")), "recorded"
        est = self._estimate(key)
        if est is None:
            raise ReplayError(f"{self.dataset.name}: no record of {dict(config)}")
        return est[0], "additive"

    def live_time(self, config: Mapping[str, int]) -> float:
        """``config``'s true value under this seed's live noise: its recorded true value times its
        persistent offset (the recorded true value itself without ``noise``, or for an additive estimate)."""
        time, _ = self.recorded_time(config)
        row = self._row.get(self._key(config))
        if self.noise is None or row is None:
            return time
        return time * self.noise.offset(self._seed, row)

    def optimum(self) -> tuple[Config, float]:
        """The best answerable configuration and its time: the best recorded one, or for a separable dataset
        the better of that and every kernel's best recorded setting composed (the separable optimum)."""
        ok = np.flatnonzero(self._ok)
        best = int(ok[np.argmin(self._time[ok])])
        config = dict(zip(self.params, map(int, self._keys[best]), strict=True))
        time = float(self._time[best])
        if self._additive is not None:
            composed = dict(config)
            for kernel, names in self.dataset.kernels.items():
                table = self._additive.tables[kernel]
                if table:
                    key = min(table, key=table.__getitem__)
                    composed.update(zip(names, key, strict=True))
            t, _ = self.recorded_time(composed)
            if t < time:
                config, time = composed, t
        return config, time

    def check(self, config: Mapping[str, int]) -> Check:
        key = self._key(config)
        row = self._row.get(key)
        if row is None:
            return Check(self._estimate(key) is not None, "" if self._estimate(key) else "not recorded")
        return Check(bool(self._ok[row]), "" if self._ok[row] else "recorded as failed")

    def describe(self) -> dict[str, Any]:
        return {
            "workload": self.name,
            "case": self.case,
            "source": self.dataset.source,
            **self.dataset.device,
        }
