"""Shared test set-up: the ``gpu`` marker skips where no CUDA GPU is visible; the Benchmark Hub's subset.

Tests read only what the repository holds: a user's clone has no lab folders beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from launchtune.kernels.backend import gpu_count

REPO = Path(__file__).resolve().parents[1]
HUB = REPO / "data" / "benchmark_hub"


def pytest_collection_modifyitems(config, items):
    if gpu_count() > 0:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible (GPU tests run on the lent GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def hub_dir() -> Path:
    """The committed subset of the Benchmark Hub's convolution caches (data/benchmark_hub/README.md)."""
    return HUB
