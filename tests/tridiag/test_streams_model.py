"""The stream-count models on synthetic timings with a known optimum, and ``launchtune streams``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.streams.model import (
    STAGES,
    denoise_host,
    evaluate,
    gomez_luna,
    load_dataset,
    nearest_choice,
    tables,
)
from tests.pipeline.conftest import run_cli_here

SIZES = sorted({int(round(f * 10**i)) for i in range(3, 8) for f in (1, 2.5, 4, 5, 7.5, 8)} | {10**8})


def synthetic(seed: int = 0, noise: float = 0.003) -> pd.DataFrame:
    """Timings that follow the seed's stream model: sum/k saved, a per-stream cost paid (best k grows)."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in SIZES:
        st = {
            "t1_h2d": 6e-7 * n + 0.01,
            "t1_comp": 2e-8 * n + 0.005,
            "t1_d2h": 1.2e-7 * n + 0.005,
            "t2_host": 3e-7 * n + 0.01,
            "t3_h2d": 3e-8 * n + 0.005,
            "t3_comp": 3e-8 * n + 0.005,
            "t3_d2h": 1.5e-7 * n + 0.01,
        }
        s = st["t1_comp"] + st["t1_d2h"] + st["t3_h2d"] + st["t3_comp"]
        base = sum(st.values())
        for k in (1, 2, 4, 8, 16, 32):
            t = base - (k - 1) / k * s + 0.02 * (k - 1)
            rows.append(
                {
                    "size": n,
                    "streams": k,
                    "threads": 256,
                    "m": 10,
                    "total_ms": t * (1 + noise * rng.normal()),
                    **st,
                }
            )
    return pd.DataFrame(rows)


def test_t_overhead_definition():
    sizes, times = tables(synthetic(noise=0.0))
    row = times[(times["size"] == 10**6) & (times["streams"] == 8)].iloc[0]
    assert row["t_overhead"] == pytest.approx(0.02 * 7, rel=1e-9)  # exactly the per-stream cost put in
    assert sizes.loc[10**8, "best_streams"] == 32 and sizes.loc[1000, "best_streams"] == 1


def test_models_find_the_optimum():
    result = evaluate(synthetic(), tau_ms=0.0047)
    s = result["summary"]
    assert s["sizes"] == 31
    assert result["sum_model"]["slope_ms_per_unknown"] == pytest.approx(2e-8 + 1.2e-7 + 3e-8 + 3e-8, rel=0.02)
    assert s["seed_model"]["within_2pct"] >= 27
    assert s["ours_all"]["within_2pct"] >= 27
    assert s["ours_test_sizes"]["of"] == 8
    table = pd.DataFrame(result["table"])
    assert (table["seed_lost_pct"] >= -1e-9).all() and (table["ours_lost_pct"] >= -1e-9).all()


def test_denoise_host_removes_host_spikes():
    df = synthetic(noise=0.0)
    df["stage1_span"] = df["t1_h2d"] + df["t1_comp"] + df["t1_d2h"]
    df["stage3_span"] = df["total_ms"] - df["stage1_span"] - df["t2_host"]
    spiky = df.copy()
    spiky.loc[(spiky["size"] == 10**6) & (spiky["streams"] == 1), "total_ms"] += 15.0  # a host-stage stall
    sizes, _ = tables(denoise_host(spiky))
    clean, _ = tables(df)
    assert sizes.loc[10**6, "best_streams"] == clean.loc[10**6, "best_streams"]
    assert tables(spiky)[0].loc[10**6, "best_ms"] == pytest.approx(clean.loc[10**6, "best_ms"])
    with pytest.raises(UserError, match="stage1_span"):
        denoise_host(synthetic())


def test_gomez_luna():
    assert gomez_luna(0.27344, 0.004448) == pytest.approx(7.84, abs=0.01)  # the seed's first table row
    assert nearest_choice(139.8) == 32 and nearest_choice(0.3) == 1 and nearest_choice(7.8) == 8


def test_load_rejects_bad_data(tmp_path):
    df = synthetic()
    bad = tmp_path / "bad.csv"
    df.drop(columns=["t1_comp"]).to_csv(bad, index=False)
    with pytest.raises(UserError, match="missing column 't1_comp'"):
        load_dataset(bad)
    odd = tmp_path / "odd.csv"
    df.assign(streams=df["streams"].replace(32, 12)).to_csv(odd, index=False)
    with pytest.raises(UserError, match="power of two"):
        load_dataset(odd)
    with pytest.raises(UserError, match="no such file"):
        load_dataset(tmp_path / "nope.csv")


def test_accepts_sweep_column_names(tmp_path):
    df = synthetic().rename(columns={s: f"ms.{s}" for s in STAGES}).assign(status="ok", workload="tridiag")
    df.loc[0, "status"] = "failed"
    path = tmp_path / "sweep.parquet"
    df.to_parquet(path)
    assert len(load_dataset(path)) == len(df) - 1


def _cli(*args):
    """``launchtune streams ARGS`` in this process: the tests read its output, exit code and files."""
    return run_cli_here("streams", *args)


def test_cli_end_to_end(tmp_path):
    data = tmp_path / "streams.csv"
    synthetic().to_csv(data, index=False)
    out = _cli("--dataset", str(data), "--out", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr
    assert "| size | measured best k |" in out.stdout and "seed model: best at" in out.stdout
    assert (tmp_path / "out" / "streams_model.json").is_file() and (
        tmp_path / "out" / "streams_table.md"
    ).is_file()


def test_cli_bad_dataset(tmp_path):
    data = tmp_path / "few.csv"
    synthetic()[lambda d: d["size"] < 5000].to_csv(data, index=False)
    for args in (["--dataset", str(tmp_path / "missing.csv")], ["--dataset", str(data)]):
        out = _cli(*args, "--out", str(tmp_path / "o"))
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1
        assert not (tmp_path / "o").exists()  # nothing written half-way


def test_load_dataset_keeps_one_stage2():
    from pathlib import Path

    from launchtune.pipeline.errors import UserError
    from launchtune.pipeline.streams.model import load_dataset

    path = Path(__file__).resolve().parents[2] / "data" / "tridiag" / "h100" / "streams_gpu" / "streams.csv"
    gpu = load_dataset(path)
    assert set(gpu["stage2"]) == {"gpu"} and len(gpu) == 31 * 6
    assert set(load_dataset(path, stage2="host")["stage2"]) == {"host"}
    with pytest.raises(UserError, match="stage2"):
        load_dataset(path, stage2="cpu")


def spike_dataset() -> pd.DataFrame:
    """``tridiag_streams.py --copies spike``'s rows: stage 2 on the device by SPIKE, on the host by streams
    (twice as slow, so a wrong pick shows in the times)."""
    spike = synthetic().assign(stage2="gpu", copies="spike")
    host = synthetic(seed=1).assign(stage2="host", copies="streams")
    return pd.concat([spike, host.assign(total_ms=2 * host["total_ms"])], ignore_index=True)


def test_load_dataset_keeps_one_pipeline(tmp_path):
    path = tmp_path / "streams.csv"
    spike_dataset().to_csv(path, index=False)
    default = load_dataset(path)  # the fastest pipeline: spike, so stage 2 on the device
    assert set(default["copies"]) == {"spike"} and set(default["stage2"]) == {"gpu"} and len(default) == 186
    assert load_dataset(path, copies="spike", stage2="gpu").equals(default)
    for kwargs in ({"copies": "streams"}, {"stage2": "host"}):  # the other one follows what was asked
        host = load_dataset(path, **kwargs)
        assert set(host["copies"]) == {"streams"} and set(host["stage2"]) == {"host"}, kwargs
    with pytest.raises(UserError, match=r"copies = 'ordered' \(there: \['spike', 'streams'\]\)"):
        load_dataset(path, copies="ordered")
    with pytest.raises(UserError, match=r"stage2 = 'host' \(there: \['gpu'\]\)"):
        load_dataset(path, copies="spike", stage2="host")


def test_load_dataset_names_a_sweeps_codes(tmp_path):
    """A merged sweep stores stage2 and copies as indices into their choices, and may hold several ends."""
    df = spike_dataset().rename(columns={s: f"ms.{s}" for s in STAGES}).assign(status="ok", ends=100)
    df["stage2"] = df["stage2"].map({"host": 0, "gpu": 1})
    df["copies"] = df["copies"].map({"streams": 0, "spike": 3})
    ends25 = df[df["copies"] == 3].assign(ends=25, total_ms=0.5)  # uneven end chunks: another pipeline
    path = tmp_path / "sweep.parquet"
    pd.concat([df, ends25], ignore_index=True).to_parquet(path)
    spike = load_dataset(path)
    assert set(spike["copies"]) == {"spike"} and set(spike["stage2"]) == {"gpu"}
    assert set(spike["ends"]) == {100} and len(spike) == 186
    assert set(load_dataset(path, copies="streams")["stage2"]) == {"host"}
    df.assign(copies=df["copies"].replace(3, 7)).to_parquet(path)
    with pytest.raises(UserError, match="copies code 7 is not one of 0 \\(streams\\), 1 \\(ordered\\)"):
        load_dataset(path)


def test_load_dataset_without_copies_is_the_streams_pipeline(tmp_path):
    path = tmp_path / "streams.csv"
    synthetic().to_csv(path, index=False)
    assert "copies" not in load_dataset(path).columns  # as before the column
    assert len(load_dataset(path, copies="streams")) == 186
    with pytest.raises(UserError, match=r"copies = 'spike' \(there: \['streams'\]\)"):
        load_dataset(path, copies="spike")


def test_cli_copies(tmp_path):
    data = tmp_path / "streams.csv"
    spike_dataset().to_csv(data, index=False)
    out = _cli("--dataset", str(data), "--copies", "streamed")
    assert out.returncode == 2 and "copies = 'streamed'" in out.stderr, out.stderr
    out = _cli("--dataset", str(data), "--copies", "fastest")
    assert out.returncode == 2 and "invalid choice: 'fastest'" in out.stderr, out.stderr
