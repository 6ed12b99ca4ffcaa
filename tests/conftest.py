"""Shared test set-up: the ``gpu`` marker skips where no CUDA GPU is visible; paths to ``../shared``."""

from __future__ import annotations

from pathlib import Path

import pytest

from launchtune.kernels.backend import gpu_count

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def pytest_collection_modifyitems(config, items):
    if gpu_count() > 0:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible (GPU tests run on the lent GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"{SHARED} is missing: CI checks out ../shared beside the repository")
    return SHARED
