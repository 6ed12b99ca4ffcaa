"""A scheduler plugin that counts each worker's connected time and the time it spent computing."""

from __future__ import annotations

import time
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin


class WorkerUsage(SchedulerPlugin):
    """Per-worker connected time and time spent computing, for the overhead summary.

    Runs inside the scheduler (same process as the sweep), so it sees every task's compute start and stop as
    the worker reported them.
    """

    name = "launchtune-worker-usage"

    def __init__(self) -> None:
        self.started = time.time()
        self.first_result: float | None = None
        self.workers: dict[str, dict[str, Any]] = {}
        self.names_seen: set[str] = set()  # every worker name that ever registered, however briefly
        self.computed = 0

    # Dask's SchedulerPlugin hooks: the scheduler always passes the worker's address (a str)
    def add_worker(self, scheduler: Any = None, worker: str = "") -> None:
        ws = scheduler.workers.get(worker) if scheduler is not None else None
        name = str(getattr(ws, "name", worker))
        self.names_seen.add(name)
        self.workers[worker] = {"name": name, "joined": time.time(), "left": None, "busy_s": 0.0, "tasks": 0}

    def remove_worker(self, scheduler: Any = None, worker: str = "", **kwargs: Any) -> None:
        if worker in self.workers and self.workers[worker]["left"] is None:
            self.workers[worker]["left"] = time.time()

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if start != "processing" or finish != "memory":
            return
        busy = sum(
            s["stop"] - s["start"] for s in kwargs.get("startstops", ()) if s.get("action") == "compute"
        )
        rec = self.workers.get(kwargs.get("worker", ""))
        if rec is not None:
            rec["busy_s"] += busy
            rec["tasks"] += 1
        self.computed += 1
        if self.first_result is None:
            self.first_result = time.time()

    def summary(self) -> dict[str, Any]:
        now = time.time()
        alive = sum((w["left"] or now) - w["joined"] for w in self.workers.values())
        busy = sum(w["busy_s"] for w in self.workers.values())
        return {
            "cluster_started": self.started,
            "first_result_after_s": None if self.first_result is None else self.first_result - self.started,
            "tasks_computed": self.computed,
            "worker_connected_s": alive,
            "worker_busy_s": busy,
            "busy_share": busy / alive if alive > 0 else None,
            "workers": list(self.workers.values()),
        }
