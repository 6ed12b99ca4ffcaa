"""Small synthetic results folders for the notebook helpers: a sweep of one or two classes with two kernels,
trained by the real ``train_sweep``, a tridiagonal streams table and a launch log."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from launchtune.pipeline.store.schema import FIXED_FIELDS, kernel_column, shard_schema
from launchtune.pipeline.store.spec import SweepSpec

KERNELS = ("a", "b")
BLOCKS = [100, 200, 300]
THREADS = [32, 64, 128]
PARAMS = [f"{k}.{p}" for k in KERNELS for p in ("blocks", "threads")]
SPEC = {
    "name": "synthetic",
    "workload": "cfd",
    "case": "inlet",
    "size": "8x4",
    "backend": "numpy",
    "options": {},
    "gpu_classes": None,
    "samples": 80,
    "test_fraction": 0.25,
    "samplers": ["random"],
    "repeats": 1,
    "batch_size": 40,
    "check": True,
    "seed": 0,
    "validate": {"top_k": 2, "pool": 100, "repeats": 3},
    "train": {"hidden_layers": [8], "max_epochs": 30},
    "output": None,
    "description": "",
    "source": "synthetic",
}
DEVICES = {"h100": (34000.0, 3350.0, 80.0, 132, 2500.0), "cpu": (None, None, None, 2, 20.0)}


def kernel_ms(blocks: np.ndarray, threads: np.ndarray, scale: float) -> np.ndarray:
    """Slow with few threads or few blocks, like the real grids; fastest at (300, 128)."""
    return scale * (1 + 32 / threads + 100 / blocks)


def sweep_frame(classes: tuple[str, ...], n: int = 80, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for c, cls in enumerate(classes):
        scale = 1.0 if cls != "cpu" else 50.0
        df = pd.DataFrame({p: rng.choice(BLOCKS if p.endswith("blocks") else THREADS, n) for p in PARAMS})
        for k in KERNELS:
            df[kernel_column(k)] = kernel_ms(df[f"{k}.blocks"], df[f"{k}.threads"], scale)
        df["total_ms"] = df[[kernel_column(k) for k in KERNELS]].sum(axis=1) + 0.1 * scale
        fp64, bw, mem, sms, mbw = DEVICES[cls]
        fixed = {
            "sweep_id": "synthetic",
            "sample_id": np.arange(n) + 1000 * c,
            "sampler": "random",
            "batch": "00000",
            "workload": "cfd",
            "case": "inlet",
            "size": "8x4",
            "backend": "numpy",
            "gpu_class": cls,
            "device_class": cls,
            "device_name": f"device {cls}",
            "sm_count": sms,
            "peak_fp64_gflops": fp64,
            "spec_bandwidth_gbs": bw,
            "spec_memory_gb": mem,
            "measured_bandwidth_gbs": mbw,
            "status": "ok",
            "reason": "",
            "verified": True,
            "repeats": 1,
            "host": "test",
            "worker": f"{cls}-0",
            "seed": seed,
            "versions": "{}",
            "timestamp": datetime(2026, 1, 1, tzinfo=UTC),
        }
        for f in FIXED_FIELDS:
            if f.name not in df:
                df[f.name] = fixed.get(f.name)
        df.loc[df.index[:2], "status"] = "invalid"  # two rows a class that training must skip
        parts.append(df)
    return pd.concat(parts, ignore_index=True)


def write_sweep(folder: Path, classes: tuple[str, ...], train: bool = True) -> Path:
    """A sweep folder as the pipeline leaves it: sweep.json, merged/ and, with ``train``, models/."""
    folder.mkdir(parents=True)
    plan = {
        "params": PARAMS,
        "values": {p: BLOCKS if p.endswith("blocks") else THREADS for p in PARAMS},
        "default": {p: (1000 if p.endswith("blocks") else 256) for p in PARAMS},
        "kernels": list(KERNELS),
    }
    key = SweepSpec.from_dict(SPEC).planning_key()
    (folder / "sweep.json").write_text(json.dumps({"spec": SPEC, "planning_key": key, "plan": plan}))
    frame = sweep_frame(classes)
    table = pa.Table.from_pandas(frame, schema=shard_schema(PARAMS, KERNELS), preserve_index=False)
    pq.write_to_dataset(table, folder / "merged", partition_cols=["gpu_class"])
    if train:
        from threadpoolctl import threadpool_limits

        from launchtune.pipeline.learn.train import train_sweep

        with threadpool_limits(limits=1):  # OpenMP/BLAS threads on a busy 2-core machine cost 5x
            train_sweep(folder, log=lambda _: None)
    return folder


@pytest.fixture(scope="session")
def results_dir(tmp_path_factory) -> Path:
    """One folder with an h100 sweep, a cpu sweep and their combination (the layout data/ will have)."""
    root = tmp_path_factory.mktemp("results")
    write_sweep(root / "sweep_h100", ("h100",))
    write_sweep(root / "sweep_cpu", ("cpu",))
    write_sweep(root / "sweep_both", ("cpu", "h100"))
    return root


def streams_frame(
    sizes=(1000, 2500, 5000, 8000, 10000, 25000, 50000, 2500000, 4000000, 5000000),
) -> pd.DataFrame:
    """Rows of ``benchmarks/tridiag_streams.py``'s streams.csv: 2 streams best from 5000 unknowns up; sizes on
    both sides of the seed's small/big split (10^6), 3 above it (its big overhead model needs 6 rows)."""
    rows = []
    for n in sizes:
        for k in (1, 2, 4, 8, 16, 32):
            gain = 0.8 if (k == 2 and n >= 5000) else 1.0
            total = (0.1 + n * 1e-5) * gain + 0.01 * k
            rows.append(
                {
                    "size": n,
                    "streams": k,
                    "threads": 256,
                    "m": 10,
                    "total_ms": total,
                    "stage1_span": total * 0.4,
                    "host_span": total * 0.2,
                    "stage3_span": total * 0.4,
                    "t1_h2d": 0.1,
                    "t1_comp": 0.02,
                    "t1_d2h": 0.03,
                    "t2_host": total * 0.2,
                    "t3_h2d": 0.02,
                    "t3_comp": 0.02,
                    "t3_d2h": 0.05,
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture
def tridiag_dir(tmp_path) -> Path:
    folder = tmp_path / "tridiag" / "h100"
    folder.mkdir(parents=True)
    frame = streams_frame()
    frame.to_csv(folder / "streams.csv", index=False)
    one = frame[frame["streams"] == 1].set_index("size")["total_ms"]
    pd.DataFrame(
        {"size": one.index, "gtsv2_ms": one.to_numpy() * 0.5, "gtsv2_nopivot_ms": one.to_numpy() * 0.4}
    ).to_csv(folder / "baselines.csv", index=False)
    (folder / "meta.json").write_text(json.dumps({"device": {"gpu_class": "h100"}, "tau_ms": 0.003}))
    return folder


def launch_log() -> pd.DataFrame:
    """Two kernels: a scan of three candidates over steps 0-2, then locked; ``b`` ends on its default."""
    rows, seq = [], 0
    for step in range(8):
        for kernel, cands, pick in (
            ("a", [(100, 32), (200, 64), (300, 128)], (300, 128)),
            ("b", [(100, 32), (1000, 256)], (1000, 256)),
        ):
            tuning = step < len(cands)
            blocks, threads = cands[step] if tuning else pick
            rows.append(
                {
                    "seq": seq,
                    "kernel": kernel,
                    "step": step,
                    "state": "startup" if tuning else "idle",
                    "blocks": blocks,
                    "threads": threads,
                    "time_ms": 0.1 + 0.01 * (threads == 32),
                    "nonoptimal": int((blocks, threads) != pick),
                }
            )
            seq += 1
    return pd.DataFrame(rows)
