"""The one error of a kernel spec."""

from __future__ import annotations

from ..workload import WorkloadError


class SpecError(WorkloadError):
    """A kernel spec that cannot be used; the message names the spec file and the field. A sweep shows it
    after its own file and ``options.spec``, one line, before any cluster starts."""

    def __init__(self, message: str):
        super().__init__(message, field="options.spec")
