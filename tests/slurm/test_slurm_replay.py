"""The scale rehearsal's replay workload (issue 18) through the real single-node SLURM: two partitions, each
answering from a recorded sweep with injected failures; every planned sample ends in exactly one row, written
by a job of its class's partition, and the failed rows are exactly the injected ones."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
import yaml

from launchtune.pipeline.sweep.rehearsal import RehearsalWorkload
from tests.pipeline.test_rehearsal import _recorded
from tests.slurm.conftest import PARTITIONS
from tests.slurm.test_slurm_sweep import Sweep

pytestmark = pytest.mark.slurm

SAMPLES = 48


def test_replayed_sweep_through_slurm_keeps_every_sample_once_with_failures(slurm, cluster_config, tmp_path):
    dataset = _recorded(tmp_path / "recorded.parquet")
    options = {"dataset": str(dataset), "time_scale": 2.0, "fail_fraction": 0.15}
    spec = tmp_path / "replay.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "slurm-replay",
                "workload": "replay",
                "case": "recorded",
                "size": "8x4",
                "backend": "numpy",
                "options": options,
                "gpu_classes": list(PARTITIONS.values()),
                "samples": SAMPLES,
                "samplers": ["random"],
                "repeats": 1,
                "batch_size": 8,
                "seed": 5,
                "validate": {"pool": 50, "top_k": 1, "repeats": 1},
                "train": {"hidden_layers": [8], "max_epochs": 20},
            }
        )
    )
    out = tmp_path / "out"
    sweep = Sweep(str(spec), "--cluster", str(cluster_config), "--out", str(out), cwd=tmp_path)
    assert sweep.finish() == 0, sweep.tail()

    merged = pq.read_table(out / "merged").to_pandas()
    replay = RehearsalWorkload("recorded", "8x4", "numpy", str(dataset), fail_fraction=0.15)
    params = ["a.blocks", "a.threads", "b.blocks", "b.threads"]
    part_of = {cls: part for part, cls in PARTITIONS.items()}
    for cls, rows in merged.groupby(merged["gpu_class"].astype(str)):
        assert sorted(rows["sample_id"]) == list(range(SAMPLES)), cls
        assert set(rows["slurm_partition"]) == {part_of[cls]}
        injected = [bool(replay.fails(dict(zip(params, r, strict=True)))) for r in rows[params].to_numpy(int)]
        assert (rows["status"] == "failed").tolist() == injected
        ok = rows[rows["status"] == "ok"]
        assert len(ok) and (ok["total_ms"] > 0).all()
    assert set(merged["gpu_class"].astype(str)) == set(PARTITIONS.values())
    assert (merged["status"] == "failed").any()  # the injection did inject
