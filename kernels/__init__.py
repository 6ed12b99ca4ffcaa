"""What runs on the device: workloads, their launch spaces, timing and run-time tuning.

This package never imports :mod:`launchtune.pipeline`; the pipeline drives it through the workload interface
in :mod:`launchtune.kernels.workload`.
"""
