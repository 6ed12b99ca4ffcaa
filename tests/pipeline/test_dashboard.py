"""The Dask dashboard of a local sweep answers while it runs; the sweep keeps Dask's performance report."""

from __future__ import annotations

import re
import urllib.request

from tests.pipeline.conftest import run_cli


def test_the_status_page_shows_the_task_stream_during_a_sweep(tmp_path, write_spec):
    out = tmp_path / "sweep"
    spec = write_spec(samples=40, batch_size=4, options={"delay": 0.1})
    # two workers: a sweep on one device measures in its own process and starts no Dask dashboard
    proc = run_cli(
        "sweep", str(spec), "--out", str(out), "--workers-per-class", "2", cwd=tmp_path, background=True
    )
    try:
        url = None
        for line in proc.stdout:
            m = re.search(r"dashboard: (http://\S+/status)", line)
            if m:
                url = m.group(1)
                break
        assert url, "the sweep printed no dashboard line"
        with urllib.request.urlopen(url, timeout=120) as page:  # the sweep is measuring now
            html = page.read().decode()
        assert page.status == 200 and "Task Stream" in html and "Dask Diagnostic UI" in html
        rest, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    report = out / "dask-performance.html"
    assert report.stat().st_size > 10_000 and "Task Stream" in report.read_text()
    assert "[dask-performance.html](dask-performance.html)" in (out / "report.md").read_text()
