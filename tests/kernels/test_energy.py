"""The NVML energy meter on a stand-in NVML (the real counter is read on the GPU machine): a missing library,
device or counter is one line and no meter; a measurement spans whole steps of the counter and divides by
the launches completed; and the kernel workload's rows say why they have no energy."""

from __future__ import annotations

import pytest

from launchtune.kernels.energy import EnergyMeter


class FakeNVML:
    """A card drawing ``watts`` while launches run and ``idle`` otherwise, whose counter moves every
    ``step_s`` of a fake clock; each launch takes ``launch_s``."""

    def __init__(self, watts=400.0, step_s=0.1, launch_s=0.002, supported=True, init_error=None, idle=70.0):
        self.watts, self.step_s, self.launch_s, self.idle = watts, step_s, launch_s, idle
        self.supported, self.init_error = supported, init_error
        self.now = 0.0
        self.energy_mJ = 0.0  # the card's true total
        self.shown = 0  # what the counter shows (updated at its steps)
        self.next_step = step_s

    def clock(self) -> float:
        return self.now

    def advance(self, seconds: float, busy: bool) -> None:
        end = self.now + seconds
        while self.next_step <= end:
            self.energy_mJ += (self.next_step - self.now) * (self.watts if busy else self.idle) * 1e3
            self.now = self.next_step
            self.shown = int(self.energy_mJ)
            self.next_step += self.step_s
        self.energy_mJ += (end - self.now) * (self.watts if busy else self.idle) * 1e3
        self.now = end

    def launch(self, n: int) -> None:
        self.advance(n * self.launch_s, busy=True)

    # the pynvml calls the meter makes
    def nvmlInit(self):
        if self.init_error:
            raise self.init_error

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        return "handle"

    def nvmlDeviceGetHandleByIndex(self, i):
        return "handle"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.supported:
            raise RuntimeError("NVMLError_NotSupported: Not Supported")
        self.advance(0.0005, busy=False)  # a read takes a little host time
        return self.shown


def test_energy_per_launch_and_power_over_whole_counter_steps():
    nvml = FakeNVML(watts=400.0, launch_s=0.002)
    meter = EnergyMeter(pci_bus_id="0000:00:06.0", nvml=nvml)
    assert meter.available and meter.reason == ""
    e = meter.measure(nvml.launch, launch_ms=2.0, clock=nvml.clock)
    assert e.window_ms >= 400 and e.launches >= 200
    # 400 W for 2 ms is 800 mJ a launch; the reads' idle moments and the chunk at each end cost a few percent
    assert e.energy_mJ == pytest.approx(800.0, rel=0.06)
    assert e.power_W == pytest.approx(400.0, rel=0.06)


@pytest.mark.parametrize(
    ("nvml", "why"),
    [
        (
            FakeNVML(init_error=OSError("libnvidia-ml.so.1: cannot open shared object file")),
            "NVML is not available",
        ),
        (FakeNVML(supported=False), "no energy counter on this device (RuntimeError: NVMLError_NotSupported"),
    ],
)
def test_no_library_or_no_counter_is_one_line_and_no_meter(nvml, why):
    meter = EnergyMeter(nvml=nvml)
    assert not meter.available and why in meter.reason and "\n" not in meter.reason
    with pytest.raises(RuntimeError, match="energy counter|NVML"):
        meter.measure(nvml.launch, 1.0, clock=nvml.clock)


def test_a_counter_that_never_moves_is_refused():
    nvml = FakeNVML(step_s=1e9)
    meter = EnergyMeter(nvml=nvml)
    with pytest.raises(RuntimeError, match="did not move"):
        meter.measure(nvml.launch, 1.0, clock=nvml.clock)
