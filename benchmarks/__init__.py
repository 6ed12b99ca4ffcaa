"""Benchmarks a user reruns on their own machine: each measures the project on a GPU (or its CPU stand-in).

Run each from the repository root as ``python -m benchmarks.<name>`` (``--help`` says what it measures) or
``bash benchmarks/<name>.sh``. Each has a CPU smoke test (``tests/benchmarks/``) and uses only public names of
``pipeline`` and ``kernels``. The harnesses of finished experiments are in ``lab/``.
"""
