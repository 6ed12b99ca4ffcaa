"""Same seed, same data, same numbers: training and the strategies do not depend on the thread count."""

from __future__ import annotations

import json

from tests.pipeline.conftest import run_cli


def _scores(metrics: dict) -> dict:
    """Every number of metrics.json but the fit times (those are wall clock)."""
    if isinstance(metrics, dict):
        return {k: _scores(v) for k, v in metrics.items() if k != "fit_seconds"}
    if isinstance(metrics, list):
        return [_scores(v) for v in metrics]
    return metrics


def test_training_gives_the_same_numbers_with_one_or_two_blas_threads(tmp_path, write_spec):
    out = tmp_path / "sweep"
    spec = write_spec(samples=80, batch_size=20, train={"hidden_layers": [16, 16], "max_epochs": 40})
    r = run_cli("sweep", str(spec), "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    runs = []
    for threads in ("1", "2"):
        env = {"OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        r = run_cli("train", str(out), cwd=tmp_path, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        runs.append(_scores(json.loads((out / "models" / "metrics.json").read_text())))
    assert runs[0] == runs[1]
    assert runs[0]["groups"]["cpu"]["models"]["mlp"]["r2_test"] is not None  # real scores were compared


def test_a_strategy_run_reprints_its_line(tmp_path):
    from tests.strategies.conftest import write_cache

    cache = write_cache(tmp_path / "gpu.json.gz", "gpu")
    args = ("strategies", "--dataset", str(cache), "--strategy", "evolve", "--budget", "30", "--seed", "3")
    lines = [run_cli(*args, cwd=tmp_path, env={"OPENBLAS_NUM_THREADS": t}).stdout for t in ("1", "2")]
    assert lines[0] == lines[1] and json.loads(lines[0])["measured"] == 30
