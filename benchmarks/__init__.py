"""Benchmarks that measure the project on a GPU (or its CPU stand-in).

Run each from the repository root as ``python -m benchmarks.<name>``.
"""
