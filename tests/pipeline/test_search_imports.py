"""What a live search on one local device imports around its measurements (issue 53: the whole command at most
1.5x its search): no Dask where no cluster runs. In a fresh interpreter, since this one's modules are
whatever earlier tests imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.pipeline.test_live_search import _recorded, _spec

REPO = Path(__file__).resolve().parents[2]

CODE = """
import json, sys
from launchtune.pipeline import cli

code = cli.main(["sweep", sys.argv[1], "--strategy", "random", "--budget", "12", "--out", sys.argv[2]])
print(json.dumps({"code": code, "dask": "distributed" in sys.modules}))
"""


def test_one_local_device_searches_without_importing_dask(tmp_path):
    spec = _spec(tmp_path, _recorded(tmp_path / "rec.parquet"), time_scale=0.0)
    out = tmp_path / "out"
    env = {"PYTHONPATH": str(REPO), "LAUNCHTUNE_RESULTS": str(tmp_path / "results")}
    done = subprocess.run(
        [sys.executable, "-c", CODE, str(spec), str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["code"] in (0, None)
    assert seen["dask"] is False  # the search measured in this process: Dask never imported
    assert (out / "figures" / "search_trace.png").is_file()
