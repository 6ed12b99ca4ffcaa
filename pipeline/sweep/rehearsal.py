"""The replay worker mode (issue 18): a sweep workload that answers from a recorded dataset and sleeps.

``workload: replay`` in a sweep spec, with ``options`` naming a recorded dataset (our merged Parquet or a
Kernel Tuner cache, anything :func:`pipeline.store.datasets.load_datasets` reads). ``run`` answers the
recorded (or, for a separable dataset, additively estimated) time of the configuration (the dataset's
objective where it is not time: a GFLOP/s cache's rows rank by GFLOP/s), through
:class:`pipeline.strategies.replay.ReplayWorkload`, and sleeps for that time times ``time_scale``: a worker
process then stands in for a GPU whose samples take as long as the recorded ones did, scaled, so the
orchestration (scheduler, tasks, shards, merge, training) can be rehearsed at hundreds of workers on one
machine.

Injected faults, all decided by a stable hash of the configuration (and worker name), so a retried batch
meets the same ones and a run is reproducible:

* ``fail_fraction``: that share of configurations raise in ``run`` (a launch failure: a ``failed`` row);
* ``straggler_fraction`` x ``straggler_factor``: that share sleep ``factor`` times longer (a slow sample);
* killed workers, for tests and benchmarks only (``$LAUNCHTUNE_REHEARSAL_KILL``, never a spec option: a spec
  is data, often someone else's, and this hook writes a file, so it is out of a spec's reach): the JSON
  ``{"workers": [...], "after": N, "dir": PATH}`` makes the named Dask workers kill their own process with
  SIGKILL after ``N`` runs, once each (a marker file in ``PATH`` keeps the restarted process alive), as a node
  lost mid-batch. The workers of a local cluster inherit the variable from the process that starts them.
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from launchtune.kernels.space import Space
from launchtune.kernels.workload import (
    SEED_MAX,
    Capabilities,
    Check,
    Timing,
    Workload,
    WorkloadError,
    integer_option,
    number_option,
)

OPTIONS = (
    "dataset",
    "device",
    "time_scale",
    "fail_fraction",
    "straggler_fraction",
    "straggler_factor",
    "seed",
)
KILL_ENV = "LAUNCHTUNE_REHEARSAL_KILL"
MAX_SCALE = 1e6  # time_scale and straggler_factor: a million times the recorded time is already days


def check_arguments(case: str, size: str, **options: Any) -> None:
    """The replay options' names, types and ranges and the dataset's path, checked without loading it
    (``WorkloadError`` naming ``options.<name>``): the sweep checks them with the spec, before the cluster
    starts, instead of the first worker failing to build."""
    unknown = [k for k in options if k not in OPTIONS]
    if unknown:
        raise WorkloadError(
            f"unknown replay option {unknown[0]!r} (known: {', '.join(OPTIONS)})", f"options.{unknown[0]}"
        )
    dataset = options.get("dataset")
    if not isinstance(dataset, str) or not dataset.strip():
        raise WorkloadError(f"a recorded dataset's path is required (got {dataset!r})", "options.dataset")
    if not Path(dataset).exists():
        raise WorkloadError(f"{dataset}: no such file or folder", "options.dataset")
    device = options.get("device")
    if device is not None and (not isinstance(device, str) or not device.strip()):
        raise WorkloadError(f"must be a name (got {device!r})"[:300], "options.device")
    number_option(options, "time_scale", 1.0, 0.0, MAX_SCALE)
    number_option(options, "fail_fraction", 0.0, 0.0, 1.0)
    number_option(options, "straggler_fraction", 0.0, 0.0, 1.0)
    number_option(options, "straggler_factor", 10.0, 1.0, MAX_SCALE)
    integer_option(options, "seed", 0, 0, SEED_MAX)
    kill_plan()


def kill_plan() -> tuple[set[str], int, Path | None]:
    """``$LAUNCHTUNE_REHEARSAL_KILL`` read: (workers, after, folder); nothing killed where it is unset."""
    raw = os.environ.get(KILL_ENV)
    if not raw:
        return set(), 0, None
    try:
        plan = json.loads(raw)
        workers, after, folder = plan["workers"], plan["after"], Path(plan["dir"])
        ok = isinstance(after, int) and after >= 1 and all(isinstance(w, str) for w in workers)
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok or not folder.is_dir():
        raise WorkloadError(
            f'${KILL_ENV}: expected {{"workers": [names], "after": N >= 1, "dir": an existing '
            f"folder}}, got {raw!r}"[:300]
        )
    return set(workers), after, folder


def _unit(key: Sequence[int], salt: str) -> float:
    """A number in [0, 1) fixed by ``key`` and ``salt``: the same configuration draws the same fault."""
    data = (salt + ":" + ",".join(str(int(v)) for v in key)).encode()
    return zlib.crc32(data) / 2**32


def worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return ""


class RehearsalWorkload(Workload):
    """A recorded dataset behind the workload interface, with sleeping and injected faults."""

    @classmethod
    def check_arguments(cls, case: str, size: Any, **options: Any) -> None:
        check_arguments(case, size, **options)

    name = "replay"
    capabilities = Capabilities(recorded=True)  # no device measured: the host's copy bandwidth is not probed
    keeps_state_on_failure = True  # an injected failure poisons nothing: the worker need not rebuild it

    def __init__(
        self,
        case: str,
        size: str,
        backend: str,
        dataset: str,
        device: str | None = None,
        time_scale: float = 1.0,
        fail_fraction: float = 0.0,
        straggler_fraction: float = 0.0,
        straggler_factor: float = 10.0,
        seed: int = 0,
    ) -> None:
        from ..store.datasets import load_datasets
        from ..strategies.replay import ReplayWorkload

        for name, value in (
            ("time_scale", time_scale),
            ("fail_fraction", fail_fraction),
            ("straggler_fraction", straggler_fraction),
        ):
            if not isinstance(value, int | float) or value < 0 or (name != "time_scale" and value > 1):
                raise WorkloadError(f"replay option {name}: must be a number in [0, 1] (got {value!r})")
        found = load_datasets(dataset)
        if device is not None:
            found = [d for d in found if d.name == device]
            if not found:
                raise WorkloadError(f"replay: {dataset} holds no dataset named {device!r}")
        if len(found) > 1:
            names = ", ".join(d.name for d in found)
            raise WorkloadError(f"replay: {dataset} holds several datasets ({names}); pick one with device")
        self.replay = ReplayWorkload(found[0], seed=seed)
        self.case, self.backend = case, backend
        self.size = tuple(int(s) for s in str(size).split("x"))
        self.dataset = dataset
        self.time_scale = float(time_scale)
        self.fail_fraction, self.straggler_fraction = float(fail_fraction), float(straggler_fraction)
        self.straggler_factor = float(straggler_factor)
        self.kill_workers, self.kill_after, self.kill_dir = kill_plan()
        self.runs = 0
        self.slept_s = 0.0

    def space(self) -> Space:
        return self.replay.space()

    def check(self, config: Mapping[str, int]) -> Check:
        return self.replay.check(config)

    def candidates(self) -> list[dict[str, int]]:
        """The recorded configurations, in the dataset's order: a search's pool, as in a replay of it."""
        return self.replay.candidates()

    def sleep_ms(self, config: Mapping[str, int], total_ms: float) -> float:
        """How long ``run`` sleeps for a configuration whose replayed time is ``total_ms``."""
        ms = total_ms * self.time_scale
        if self.straggler_fraction and _unit(self.replay._key(config), "straggler") < self.straggler_fraction:
            ms *= self.straggler_factor
        return ms

    def fails(self, config: Mapping[str, int]) -> bool:
        return bool(self.fail_fraction) and _unit(self.replay._key(config), "fail") < self.fail_fraction

    def run(self, config: Mapping[str, int], repeats: int) -> Timing:
        self.runs += 1
        self._maybe_die()
        if self.fails(config):
            raise RuntimeError("injected failure (replay fail_fraction)")
        timing = self.replay.run(config, repeats)
        goal = self.replay.dataset.objective
        if not goal.is_time:  # the dataset's own objective, as a kernel spec's metric states its own
            # The replay answers the objective's cost (1/GFLOP/s). The row's time is the time recorded beside
            # it, drawn as the cost was (same ratio to the record): a cost in ``total_ms`` made the report's
            # times 1/GFLOP/s. A cache that recorded no time keeps the cost there, as before (the rows and the
            # re-measure need a number; the report's ``objective`` says what it is).
            cost, recorded = timing.total, self.replay.recorded_time(config)[0]
            ratio = cost / recorded if 0 < recorded < float("inf") else 1.0
            measured = self.replay.measured_ms(config) * ratio
            if math.isfinite(measured):
                kernels = {k: v * ratio for k, v in timing.kernels.items()}
                timing = Timing(kernels, measured, timing.repeats, dict(timing.extra))
            timing.extra.update(objective=cost, metrics={goal.name: goal.value(cost)})
        ms = self.sleep_ms(config, timing.total)  # the recorded time (its cost where none was recorded)
        if 0 < ms < float("inf"):  # a recorded failure answers inf: it fails at once
            time.sleep(ms / 1000)
            self.slept_s += ms / 1000
        return timing

    def _maybe_die(self) -> None:
        if not self.kill_workers or self.runs < self.kill_after or self.kill_dir is None:
            return
        name = worker_name()
        if name not in self.kill_workers:
            return
        marker = self.kill_dir / f"{name}.killed"
        try:  # O_EXCL: exactly one process of this name dies, even if two raced here
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, f"{os.getpid()} {time.time()}\n".encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)

    def describe(self) -> dict[str, Any]:
        info = self.replay.describe()
        kernels = list(self.replay.dataset.kernels)
        goal = self.replay.dataset.objective
        # a dataset whose objective is not time (a GFLOP/s cache) states it, as a kernel spec does: rows then
        # rank by its cost and carry its value (metric.NAME); the row's time is the replayed cost, since such
        # a dataset keeps no time of its own
        stated = {} if goal.is_time else {"objective": goal.as_dict(), "measures": [f"metric.{goal.name}"]}
        return {**info, "workload": self.name, "dataset": self.dataset, "kernels": kernels, **stated}


def make_workload(case: str, size: str, backend: str = "numpy", **options: Any) -> RehearsalWorkload:
    if "dataset" not in options:
        raise WorkloadError(
            "replay workload: options.dataset must name a recorded dataset (Parquet or cache)"
        )
    unknown = [k for k in options if k not in OPTIONS]
    if unknown:
        raise WorkloadError(f"unknown replay option {unknown[0]!r} (known: {', '.join(OPTIONS)})")
    return RehearsalWorkload(case, size, backend, **options)
