"""One thing tuned at run time: the one object under ``autotune(...)`` and the CFD solver's tuners alike.

A :class:`Tuning` is built over a launch space (a :class:`~launchtune.kernels.space.Space`: its parameters,
its default and what can run) for one GPU class and size, and stands in for the state machine
(:class:`~launchtune.kernels.autotune.tuner.Autotuner`) around each launch: ``param`` (or ``config``),
``begin()``, ``end()``, ``reject(why)``. Everything else a run-time tuning needs is done here, once:

- candidates: a tuning table's ranked configurations for this GPU class at the nearest size
  (:func:`~launchtune.kernels.tuning_table.table_seeds`), those valid in the space, at most ``seed_count``;
  without a table (or nothing in it for this class), the default and ``scan - 1`` configurations drawn
  with ``seed`` (``scan=None``: the whole space). ``default_first`` puts the default before a table's picks
  too; ``pinned`` sets parameters every drawn or table candidate takes (the CFD fused tuner's arithmetic);
- a remembered pick locked at once, without a scan: the user's cache (``cache``, keyed by GPU class,
  ``identity`` and ``key_text``), else a table's ``runtime`` entry at exactly this size;
- a candidate that cannot run dropped with its reason; when none is left, the default, locked;
- each finished scan's pick written to the cache, and the result as a ``runtime`` table entry.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..space import Space
from ..tuning_table import RUNTIME, size_text, table_seeds
from .cache import PickCache
from .tuner import IDLE, Autotuner, TunerError

Param = tuple[int, ...]


class Tuning:
    """Tunes one launch over ``space`` while the real run goes on (module docstring)."""

    def __init__(
        self,
        name: str,
        space: Space,
        *,
        gpu_class: str,
        size: str | Sequence[int],
        table: str | Path | None = None,
        seed_count: int = 8,
        scan: int | None = 100,
        seed: int = 0,
        default_first: bool = False,
        pinned: Mapping[str, int] | None = None,
        cache: PickCache | None = None,
        identity: str = "",
        key_text: str = "",
        info: Mapping[str, Any] | None = None,
        clock: Any = None,
        wallclock: Callable[[], float] = time.monotonic,
        step: Callable[[], int] | None = None,
        log: Any = None,
        **tuner_options: Any,
    ):
        self.name, self.space, self.names = name, space, list(space.names)
        self.gpu_class, self.size = str(gpu_class), size_text(size)
        self.cache, self.identity, self.key_text = cache, identity, key_text
        self.info = dict(info or {})  # written into the table entry (device, case, ...)
        self.default: Param = self.param_of(space.default)
        self.rejected: list[dict[str, Any]] = []
        self._saved = 0  # scans already written to the cache
        self._options = {"clock": clock, "wallclock": wallclock, "step": step, "log": log, **tuner_options}
        configs, self.seed, locked = self._candidates(table, seed_count, scan, seed, default_first, pinned)
        self.seeded = table is not None and not self.seed.startswith("none")
        self.cache_state = "off" if cache is None else "miss"
        stored = cache.get(self.gpu_class, identity, key_text) if cache is not None else None
        if stored is not None and sorted(stored["config"]) == sorted(self.names):
            if space.is_valid(stored["config"]):
                locked, self.cache_state = self.param_of(stored["config"]), "hit"
        candidates = [self.param_of(c) for c in configs]
        self._use(self._tuner([locked, *candidates] if locked is not None else candidates), locked)

    # --- what a launch asks ------------------------------------------------------------------------------
    @property
    def param(self) -> Param:
        """The values of ``names`` for the next launch."""
        return self.tuner.param  # type: ignore[return-value]

    @property
    def config(self) -> dict[str, int]:
        return self.config_of(self.param)

    @property
    def state(self) -> str:
        return self.tuner.state

    @property
    def candidates(self) -> list[Param]:
        return self.tuner.candidates  # type: ignore[return-value]

    def _end_and_remember(self) -> None:
        """``end()`` with a cache: a scan that finished with this launch has its pick written to it."""
        self.tuner.end()
        if len(self.tuner.scans) > self._saved:
            self._saved = len(self.tuner.scans)
            last = self.tuner.scans[-1]
            if not last["restored"] and self.cache is not None:
                self.cache.put(
                    self.gpu_class,
                    self.identity,
                    self.key_text,
                    self.config_of(last["best"]),
                    ms=last["best_ms"],
                    kernel=self.info.get("kernel_name", self.name),
                )

    def reject(self, why: str) -> None:
        """The configuration ``param`` cannot run (call instead of ``end()``): dropped with ``why``; with
        nothing left, the default, locked (``TunerError`` where the default itself cannot run)."""
        param = self.param
        self.rejected.append({"config": self.config_of(param), "reason": why})
        if len(self.tuner.candidates) > 1:
            self.tuner.reject()
            return
        if param == self.default:
            raise TunerError(f"{self.name}: the default configuration {self.space.default} cannot run: {why}")
        self._use(self._tuner([self.default]), self.default)

    # --- what a run reports ------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """The state machine's counts (``Autotuner.stats``) with ``config`` for its ``param``, where the
        candidates came from (``seed``), whether the cache answered and the rejected candidates."""
        s = self.tuner.stats()
        param = s.pop("param")
        return {
            "config": None if param is None else self.config_of(param),
            **s,
            "seed": self.seed,
            "cache": self.cache_state,
            "rejected": list(self.rejected),
        }

    def table_entry(self, keep: int = 8) -> dict[str, Any] | None:
        """This tuning as a ``runtime`` table entry (its pick first, then the ranking with each sample's
        milliseconds), which a later run's ``table`` locks to; None before a scan finished or a lock."""
        if not self.tuner.scans:
            return None
        ranked = self.tuner.ranking()
        best = self.param if self.state == IDLE else (ranked[0][0] if ranked else None)
        if best is None:
            return None
        rows: list[dict[str, Any]] = [
            {"config": self.config_of(p), "time_ms": round(ms, 6)} for p, ms in ranked[:keep]
        ]
        if not rows or rows[0]["config"] != self.config_of(best):
            rows.insert(0, {"config": self.config_of(best)})
        return {
            "gpu_class": self.gpu_class,
            "size": self.size,
            "source": RUNTIME,
            "best": rows[0]["config"],
            "candidates": rows,
            "samples": self.tuner.samples,
            "launches_per_sample": self.tuner.launches_per_sample,
            "reducer": self.tuner.reducer,
            **self.info,
        }

    def param_of(self, config: Mapping[str, int]) -> Param:
        return tuple(int(config[n]) for n in self.names)

    def config_of(self, param: Hashable) -> dict[str, int]:
        return dict(zip(self.names, param, strict=True))  # type: ignore[call-overload]

    # --- internals ---------------------------------------------------------------------------------------
    def _tuner(self, candidates: list[Param]) -> Autotuner:
        return Autotuner(self.name, candidates, **self._options)

    def _use(self, tuner: Autotuner, locked: Param | None) -> None:
        """Launch through ``tuner`` (locked to ``locked``): ``begin`` and, without a cache, ``end`` are its
        own, so a launch pays no call in between (a CFD step makes 28 launches)."""
        self.tuner = tuner
        if locked is not None:
            tuner.lock(locked)
        self._saved = len(tuner.scans)
        self.begin: Callable[[], None] = tuner.begin
        self.end: Callable[[], None] = tuner.end if self.cache is None else self._end_and_remember

    def _candidates(
        self,
        table: str | Path | None,
        seed_count: int,
        scan: int | None,
        seed: int,
        default_first: bool,
        pinned: Mapping[str, int] | None,
    ) -> tuple[list[dict[str, int]], str, Param | None]:
        """(configurations, where they came from, a remembered pick to lock or None)."""
        space, default = self.space, dict(self.space.default)
        pin = {k: int(v) for k, v in (pinned or {}).items() if k in default}
        line = "none: no table"
        if table is not None:
            seeds = table_seeds(table, self.gpu_class, self.size, default)
            line = seeds.where
            listed = _unique([{**c, **pin} for c in seeds.configs])
            valid = [c for c in listed if space.is_valid(c)]
            if seeds.configs and not valid:
                line = f"none: no configuration of {line} is valid here"
            if valid:
                moved = sum(any(c.get(k) != v for k, v in pin.items()) for c in seeds.configs)
                if len(listed) > len(valid):
                    line += f" ({len(listed) - len(valid)} invalid here, dropped)"
                if moved:
                    line += f" ({moved} run with {_text(pin)} instead of the table's value)"
                picks = _unique([default, *valid[:seed_count]] if default_first else valid[:seed_count])
                if seeds.source == RUNTIME and seeds.size == self.size:
                    return _unique([valid[0], *picks]), f"locked from {line}", self.param_of(valid[0])
                return picks, line, None
        drawn = list(space.grid()) if scan is None else space.sample(scan, seed)
        drawn = [c for c in _unique([{**c, **pin} for c in drawn]) if c != default and space.is_valid(c)]
        configs = [default, *drawn[: None if scan is None else scan - 1]]
        return configs, f"{line}; scanning {len(configs)} configurations from scratch", None


def _unique(configs: list[dict[str, int]]) -> list[dict[str, int]]:
    seen: set[tuple[tuple[str, int], ...]] = set()
    out = []
    for c in configs:
        key = tuple(sorted(c.items()))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _text(config: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())
