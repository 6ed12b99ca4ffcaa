"""Fixtures of the pipeline tests, shared with the fault tests."""

from tests.pipeline.conftest import write_spec  # noqa: F401
