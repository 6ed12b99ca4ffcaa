"""Energy and power of a kernel's launches from NVML's total-energy counter, read only.

NVML (``pynvml``, the ``nvidia-ml-py`` package) keeps a running total of the energy the card has used since
the driver loaded (``nvmlDeviceGetTotalEnergyConsumption``, mJ, Volta and newer). The counter moves in steps
(about every 100 ms on data-centre cards), so one launch of a few milliseconds cannot be read from it. A
measurement therefore launches the configuration for a window of at least ``window_ms`` (default 400 ms,
several steps of the counter) and reads the counter at two of its own steps:

1. poll the counter until it moves (its value is then fresh: the card's energy up to about now), note it and
   the host clock;
2. launch the configuration in chunks of about ``CHUNK_MS`` each, synchronising after each chunk, so the
   launches counted are the ones completed;
3. once the window has passed, keep launching chunks until the counter moves again; note it, the host clock
   and the launches completed.

Energy per launch is the counter's difference over the launches; mean power is that difference over the host
time between the two steps (mJ / ms = W). Each end is off by at most one chunk, so the error from the
counter's steps is about ``2 * CHUNK_MS / window_ms`` (5% at the defaults), less on average.

Nothing here sets anything: no clocks, no power limits, no persistence mode. Where NVML, the device or its
counter is absent (a CPU, some virtual machines, cards older than Volta), :class:`EnergyMeter` says why in
one line (``reason``) and ``measure`` is never asked: time still works, and the rows leave energy empty.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

WINDOW_MS = 400.0
CHUNK_MS = 10.0
STEP_TIMEOUT_S = 2.0  # the counter not moving for this long: it is not a live counter


@dataclass(frozen=True)
class Energy:
    """One configuration's energy per launch (mJ) and mean power (W), over ``launches`` in ``window_ms``."""

    energy_mJ: float
    power_W: float
    launches: int
    window_ms: float


class EnergyMeter:
    """The energy counter of the device at ``pci_bus_id`` (else NVML's device ``index``); ``available``
    False with ``reason`` where there is none."""

    def __init__(self, pci_bus_id: str | None = None, index: int = 0, nvml: Any = None):
        self.reason = ""
        self._handle: Any = None
        self._nvml: Any = None
        try:
            if nvml is None:
                import pynvml  # nvidia-ml-py

                nvml = pynvml
            nvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001  (no library, no driver: both mean no counter)
            self.reason = f"no energy counter: NVML is not available ({type(exc).__name__}: {exc})"
            return
        try:
            if pci_bus_id:
                handle = nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
            else:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        except Exception as exc:  # noqa: BLE001  (NVMLError_NotSupported on older cards and some VMs)
            self.reason = f"no energy counter on this device ({type(exc).__name__}: {exc})"
            return
        self._nvml, self._handle = nvml, handle

    @property
    def available(self) -> bool:
        return self._handle is not None

    def read_mJ(self) -> int:
        return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))

    def _next_step(
        self, launch: Callable[[], None] | None, clock: Callable[[], float]
    ) -> tuple[int, float, int]:
        """Wait for the counter to move (launching chunks meanwhile where ``launch`` is given): its new
        value, the host time then and the chunks launched while waiting."""
        start = self.read_mJ()
        began = clock()
        chunks = 0
        while True:
            if launch is not None:
                launch()
                chunks += 1
            else:
                time.sleep(0.001)
            value = self.read_mJ()
            now = clock()
            if value != start:
                return value, now, chunks
            if now - began > STEP_TIMEOUT_S:
                raise RuntimeError(f"the energy counter did not move in {STEP_TIMEOUT_S:g} s")

    def measure(
        self,
        launch_chunk: Callable[[int], None],
        launch_ms: float,
        window_ms: float = WINDOW_MS,
        clock: Callable[[], float] = time.perf_counter,
    ) -> Energy:
        """Energy per launch and mean power of a launch taking about ``launch_ms``: ``launch_chunk(n)``
        launches it ``n`` times and waits for them to finish."""
        if not self.available:
            raise RuntimeError(self.reason)
        per_chunk = max(1, math.ceil(CHUNK_MS / max(launch_ms, 1e-3)))
        launches = 0

        def chunk() -> None:
            nonlocal launches
            launch_chunk(per_chunk)
            launches += per_chunk

        first, t0, _ = self._next_step(None, clock)
        while (clock() - t0) * 1e3 < window_ms:
            chunk()
        last, t1, _ = self._next_step(chunk, clock)
        used = float(last - first)
        elapsed_ms = (t1 - t0) * 1e3
        return Energy(used / launches, used / elapsed_ms, launches, elapsed_ms)
