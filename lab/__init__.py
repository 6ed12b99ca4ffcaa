"""Harnesses of finished experiments: each reproduces the data it produced (see lab/README.md).

Run each from the repository root as ``python -m lab.<name>`` (or ``bash lab/<name>.sh``). Not installed with
the package: what a user runs is in ``benchmarks/``.
"""
