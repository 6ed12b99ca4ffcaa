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

from .backend import Backend, _import_cupy, gpu_count


@dataclass(frozen=True)
class ClassSpec:
    """Data-sheet figures per GPU class: FP64 and FP32 peak without tensor or matrix cores, memory bandwidth
    and size, the SMs (NVIDIA) or compute units (AMD) one device has, its last-level cache (L2 on NVIDIA and
    on CDNA; the Infinity Cache on RDNA 2 and 3), its vendor. The fields after ``source`` are newer: a site's
    class (``$LAUNCHTUNE_CLASS_SPEC``) may leave them out."""

    peak_fp64_gflops: float
    bandwidth_gbs: float
    memory_gb: float
    source: str
    peak_fp32_gflops: float | None = None
    sm_count: int | None = None
    llc_mb: float | None = None
    vendor: str | None = None  # "nvidia" or "amd"


# C2075, P100, V100: FP64, bandwidth and memory from Table 4 of the CFD seed (Xue & Roy); their FP32, SMs and
# L2 from NVIDIA's Fermi (Tesla C2075 board spec), Pascal (P100 PCIe) and Volta (V100 SXM2) white papers.
# A100, H100, H200: NVIDIA data sheets (A100 40GB: the PCIe and SXM4 boards share these figures; H100 SXM5
# 80GB; H200 SXM 141GB) and the Ampere / Hopper architecture white papers for SMs and L2.
# The FAIR Benchmark Hub's other cards (data/benchmark_hub/convolution):
#   RTX A4000, RTX A6000: NVIDIA RTX A4000 / A6000 data sheets (FP32 19.2 / 38.7 TFLOPS, 448 / 768 GB/s,
#     16 / 48 GB GDDR6; e.g. https://servethehome.com/nvidia-rtx-a6000-48gb-gpu-drops-quadro-designation);
#     GA104 / GA102 as configured there: 48 / 84 SMs, 4 / 6 MB L2, FP64 at 1/32 of FP32.
#   MI250X: AMD Instinct MI250X data sheet, per graphics compute die (what HIP and Kernel Tuner see as one
#     device): half the board's 220 CUs, 47.9 TFLOPS vector FP64 and FP32, 128 GB HBM2e and 3.2768 TB/s;
#     L2 8 MB per GCD (ROCm documentation, "AMD GPU specifications",
#     https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html).
#   Radeon PRO W6600, W7800: AMD product pages (28 / 70 CUs, FP32 10.4 / 45.2 TFLOPS, FP64 0.65 / 1.41
#     TFLOPS, 8 / 32 GB GDDR6 at 224 / 576 GB/s) and the ROCm specifications page for the Infinity Cache
#     (32 / 64 MB), their last-level cache.
# "cpu" has no sheet and relies on the measured bandwidth.
CLASS_SPECS: dict[str, ClassSpec] = {
    "c2075": ClassSpec(513, 144, 3, "Xue & Roy Table 4", 1030, 14, 0.75, "nvidia"),
    "p100": ClassSpec(4700, 720, 16, "Xue & Roy Table 4", 9300, 56, 4, "nvidia"),
    "v100": ClassSpec(7500, 900, 16, "Xue & Roy Table 4", 15700, 80, 6, "nvidia"),
    "a100": ClassSpec(
        9700, 1555, 40, "NVIDIA A100 data sheet (40GB, PCIe and SXM4)", 19500, 108, 40, "nvidia"
    ),
    "h100": ClassSpec(34000, 3350, 80, "NVIDIA H100 data sheet (SXM5 80GB)", 67000, 132, 50, "nvidia"),
    "h200": ClassSpec(34000, 4800, 141, "NVIDIA H200 data sheet (SXM 141GB)", 67000, 132, 50, "nvidia"),
    "a4000": ClassSpec(599, 448, 16, "NVIDIA RTX A4000 data sheet", 19200, 48, 4, "nvidia"),
    "a6000": ClassSpec(1210, 768, 48, "NVIDIA RTX A6000 data sheet", 38700, 84, 6, "nvidia"),
    "mi250x": ClassSpec(23950, 1638, 64, "AMD Instinct MI250X data sheet, one GCD", 23950, 110, 8, "amd"),
    "w6600": ClassSpec(650, 224, 8, "AMD Radeon PRO W6600 product page", 10400, 28, 32, "amd"),
    "w7800": ClassSpec(1410, 576, 32, "AMD Radeon PRO W7800 product page", 45200, 70, 64, "amd"),
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
# Facts of the class that rows do not carry: the combined models read them from this registry by class
# (``class_features``), so rows measured before a fact was added learn from it too. The vendor is two 0/1
# columns, so the CPU (neither) is not taken for an AMD card.
CLASS_FEATURES = ("peak_fp32_gflops", "llc_mb", "vendor_nvidia", "vendor_amd")


def class_features(gpu_class: str) -> dict[str, float | None]:
    """The ``CLASS_FEATURES`` of a class from the registry: zeros for the CPU (no data sheet), None for a
    figure the registry lacks (a site's own class)."""
    if gpu_class == "cpu":
        return dict.fromkeys(CLASS_FEATURES, 0.0)
    spec = CLASS_SPECS.get(gpu_class)
    vendor = spec.vendor if spec else None
    return {
        "peak_fp32_gflops": spec.peak_fp32_gflops if spec else None,
        "llc_mb": spec.llc_mb if spec else None,
        "vendor_nvidia": None if vendor is None else float(vendor == "nvidia"),
        "vendor_amd": None if vendor is None else float(vendor == "amd"),
    }


_CLASS_PATTERNS = [
    (re.compile(r"C20(70|75)", re.I), "c2075"),
    (re.compile(r"P100", re.I), "p100"),
    (re.compile(r"V100", re.I), "v100"),
    (re.compile(r"A100", re.I), "a100"),
    (re.compile(r"H100", re.I), "h100"),
    (re.compile(r"H200", re.I), "h200"),
    (re.compile(r"A4000", re.I), "a4000"),
    (re.compile(r"A6000", re.I), "a6000"),
    (re.compile(r"MI250X", re.I), "mi250x"),
    (re.compile(r"W6600", re.I), "w6600"),
    (re.compile(r"W7800", re.I), "w7800"),
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
    if cupy is None:  # gpu_count() is 0 then; said here so the type checker knows too
        return []
    names = []
    for i in range(gpu_count()):
        name = cupy.cuda.runtime.getDeviceProperties(i)["name"]
        names.append(name.decode() if isinstance(name, bytes) else str(name))
    return names
