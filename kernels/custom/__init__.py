"""Your own CUDA kernel as a workload: a source file and a YAML spec of its tunable parameters, in Kernel
Tuner's vocabulary (``docs/kernel.md``)."""
