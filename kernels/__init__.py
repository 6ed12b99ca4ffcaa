"""What runs on the device: workloads, their launch spaces, timing and run-time tuning.

This package never imports :mod:`pipeline`; the pipeline drives it through the workload interface in
:mod:`kernels.workload`.
"""
