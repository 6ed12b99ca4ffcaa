"""How experiments are planned, fanned out, stored, learned from and reported.

Drives :mod:`launchtune.kernels`'s workloads through the workload interface (``kernels/workload.py``), built
by name through the registry (``pipeline/store/workloads.py``).
"""
