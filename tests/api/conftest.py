"""The caller's own Dask cluster, as a user's notebook makes one."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    # threads in this process: the stand-in's fake CuPy is this process's (a thread per worker, as a user's
    # LocalCluster() may have); one worker, so the rows come in one order
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    )
    with cluster, distributed.Client(cluster) as client:
        yield client
