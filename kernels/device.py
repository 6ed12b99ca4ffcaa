"""Facts about the device a workload runs on: its name, GPU class, spec-sheet figures and measured bandwidth.

The GPU class (``h100``, ``v100``, ``cpu``, ...) is the partition key of every result, so it is derived here
in one place from the device name.
"""

from __future__ import annotations

import json
import os
import platform
import re
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from kernels.backend import Backend, _import_cupy, gpu_count


@dataclass(frozen=True)
class ClassSpec:
    """Spec-sheet figures per GPU class (FP64 without tensor cores)."""

    peak_fp64_gflops: float
    bandwidth_gbs: float
    memory_gb: float
    source: str


# C2075, P100, V100: Table 4 of the CFD seed (Xue & Roy). The rest: NVIDIA data sheets (A100 SXM4 40GB,
# H100 SXM5 80GB, H200 SXM 141GB); "cpu" has no sheet and relies on the measured bandwidth.
CLASS_SPECS: dict[str, ClassSpec] = {
    "c2075": ClassSpec(513, 144, 3, "Xue & Roy Table 4"),
    "p100": ClassSpec(4700, 720, 16, "Xue & Roy Table 4"),
    "v100": ClassSpec(7500, 900, 16, "Xue & Roy Table 4"),
    "a100": ClassSpec(9700, 1555, 40, "NVIDIA A100 data sheet (SXM4 40GB)"),
    "h100": ClassSpec(34000, 3350, 80, "NVIDIA H100 data sheet (SXM5 80GB)"),
    "h200": ClassSpec(34000, 4800, 141, "NVIDIA H200 data sheet (SXM 141GB)"),
}
GPU_CLASSES = tuple(CLASS_SPECS) + ("cpu",)

# A site's own class (a `device:` block of cluster_configs/slurm.yaml) reaches its workers' rows through this
# variable, which the class's SLURM job exports: JSON with the fields of ClassSpec.
CLASS_SPEC_ENV = "LAUNCHTUNE_CLASS_SPEC"


def class_spec(gpu_class: str) -> ClassSpec | None:
    """The spec-sheet figures of a class: the registry's, else the site's from ``$LAUNCHTUNE_CLASS_SPEC``."""
    if gpu_class in CLASS_SPECS:
        return CLASS_SPECS[gpu_class]
    raw = os.environ.get(CLASS_SPEC_ENV)
    if not raw:
        return None
    try:
        facts = json.loads(raw)
        return ClassSpec(
            float(facts["peak_fp64_gflops"]),
            float(facts["bandwidth_gbs"]),
            float(facts["memory_gb"]),
            str(facts.get("source", CLASS_SPEC_ENV)),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"${CLASS_SPEC_ENV}: unreadable class spec ({exc})") from None


# The device facts a worker writes into every row and the combined surrogates learn from (Table 4 of the CFD
# seed, plus the SM count and the copy bandwidth measured on the worker).
DEVICE_FEATURES = (
    "peak_fp64_gflops",
    "spec_bandwidth_gbs",
    "spec_memory_gb",
    "sm_count",
    "measured_bandwidth_gbs",
)
# The ones read off a spec sheet: a class without a sheet (the CPU) has none.
SPEC_SHEET_FEATURES = frozenset({"peak_fp64_gflops", "spec_bandwidth_gbs", "spec_memory_gb"})

_CLASS_PATTERNS = [
    (re.compile(r"C20(70|75)", re.I), "c2075"),
    (re.compile(r"P100", re.I), "p100"),
    (re.compile(r"V100", re.I), "v100"),
    (re.compile(r"A100", re.I), "a100"),
    (re.compile(r"H100", re.I), "h100"),
    (re.compile(r"H200", re.I), "h200"),
]


def gpu_class_of(device_name: str) -> str:
    """``"NVIDIA H100 80GB HBM3"`` -> ``"h100"``; an unknown GPU gets a slug of its name."""
    for pattern, cls in _CLASS_PATTERNS:
        if pattern.search(device_name):
            return cls
    slug = re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")
    return slug or "unknown"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_device(backend: Backend) -> dict[str, Any]:
    """Name, class, SMs, memory, versions and spec figures of the device ``backend`` runs on."""
    facts: dict[str, Any] = {"backend": backend.name, "numpy_version": np.__version__}
    if backend.is_gpu:
        cp = backend.xp
        dev = cp.cuda.Device()
        props = cp.cuda.runtime.getDeviceProperties(dev.id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        facts.update(
            device_name=name,
            gpu_class=gpu_class_of(name),
            device_index=int(dev.id),
            sm_count=int(props["multiProcessorCount"]),
            memory_gb=round(props["totalGlobalMem"] / 1e9, 2),
            compute_capability=f"{props['major']}.{props['minor']}",
            cuda_runtime=int(cp.cuda.runtime.runtimeGetVersion()),
            cuda_driver=int(cp.cuda.runtime.driverGetVersion()),
            cupy_version=cp.__version__,
            cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES", ""),
            pci_bus_id=str(dev.pci_bus_id),  # tells the cards of one host apart in the results
        )
    else:
        facts.update(
            device_name=_cpu_name(),
            gpu_class="cpu",
            device_index=0,
            sm_count=os.cpu_count() or 1,
            memory_gb=None,
            compute_capability="",
            cuda_runtime=0,
            cuda_driver=0,
            cupy_version="",
            cuda_visible_devices="",
            pci_bus_id="",
        )
    spec = class_spec(facts["gpu_class"])
    facts["peak_fp64_gflops"] = spec.peak_fp64_gflops if spec else None
    facts["spec_bandwidth_gbs"] = spec.bandwidth_gbs if spec else None
    facts["spec_memory_gb"] = spec.memory_gb if spec else None
    return facts


def measure_copy_bandwidth(backend: Backend, nbytes: int | None = None, repeats: int = 7) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written (median of repeats)."""
    xp = backend.xp
    nbytes = nbytes or (1 << 30 if backend.is_gpu else 1 << 26)
    src = xp.ones(nbytes // 8, dtype=np.float64)
    dst = xp.empty_like(src)
    dst[...] = src  # warm-up
    watch = backend.stopwatch()
    times = []
    for _ in range(repeats):
        a = watch.mark()
        dst[...] = src
        b = watch.mark()
        times.append(watch.elapsed_ms(a, b))
    return 2 * nbytes / (float(np.median(times)) * 1e-3) / 1e9


def spec_dict(gpu_class: str) -> dict[str, Any]:
    spec = CLASS_SPECS.get(gpu_class)
    return asdict(spec) if spec else {}


def visible_gpu_names() -> list[str]:
    """Names of the CUDA devices visible to this process, in index order (empty without CuPy or a GPU).

    The pipeline asks this before it starts one worker per GPU, so each worker can be named and routed by
    class without the pipeline importing CuPy itself.
    """

    cupy = _import_cupy()
    names = []
    for i in range(gpu_count()):
        name = cupy.cuda.runtime.getDeviceProperties(i)["name"]
        names.append(name.decode() if isinstance(name, bytes) else str(name))
    return names
