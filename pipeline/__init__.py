"""How experiments are planned, fanned out, stored, learned from and reported.

Drives :mod:`kernels` only through :func:`kernels.workload.make_workload` and the workload interface.
"""

try:
    from importlib.metadata import PackageNotFoundError, version

    __version__ = version("launchtune")
except PackageNotFoundError:  # run from a checkout that was never pip-installed (the GPU machine)
    __version__ = "0.1.0+checkout"
