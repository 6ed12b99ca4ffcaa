"""The workloads the pipeline itself provides, by name: they read recorded data (pipeline's business), so they
are registered here rather than in ``kernels.workload``, which never imports pipeline. Its own module so the
spec's checks (``pipeline.sweep.spec``) know the names without importing the worker's machinery."""

from __future__ import annotations

PIPELINE_WORKLOADS = {"replay": "pipeline.sweep.rehearsal:make_workload"}
