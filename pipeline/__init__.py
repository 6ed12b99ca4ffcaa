"""How experiments are planned, fanned out, stored, learned from and reported.

Drives :mod:`launchtune.kernels` only through :func:`kernels.workload.make_workload` and the workload
interface.
"""
