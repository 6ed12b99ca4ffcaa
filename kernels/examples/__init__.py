"""Example kernels for the ``kernel`` workload: CUDA sources, their kernel specs and numpy references."""
