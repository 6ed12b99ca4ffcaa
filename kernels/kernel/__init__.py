"""Your own CUDA kernel as a workload: a source file and a YAML spec of its tunable parameters, in Kernel
Tuner's vocabulary (``docs/kernel.md``). ``pick_for_device`` gives a sweep's tuned configuration for the GPU
this process runs on."""

from .pick import DevicePick, pick_for_device
from .spec import KernelSpec, load_kernel_spec

__all__ = ["DevicePick", "KernelSpec", "load_kernel_spec", "pick_for_device"]
