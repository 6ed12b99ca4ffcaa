"""Several workers of one class (issue 9): one local worker per GPU, pinned and named after the user's own
CUDA_VISIBLE_DEVICES; the measuring order with its cut tail; two CPU workers sharing a sweep to the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from launchtune.pipeline.cluster.local import plan_local_workers
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.batching import (
    TAIL_BATCHES,
    TAIL_MIN_SIZE,
    TAIL_PARTS,
    batches,
    measure_order,
)
from launchtune.pipeline.store.folder import SweepFolder
from launchtune.pipeline.store.shards import pending_batches
from tests.pipeline.conftest import REPO, run_cli

H200 = "NVIDIA H200"


def _plan(names, visible, **kw):
    return [
        (w["name"], w["gpu_class"], w["env"]["CUDA_VISIBLE_DEVICES"])
        for w in plan_local_workers(names, visible, **kw)
    ]


def test_one_worker_per_gpu_pinned_to_the_users_own_devices():
    assert _plan([H200, H200], None) == [("h200-gpu0", "h200", "0"), ("h200-gpu1", "h200", "1")]
    # the user picked cards 2 and 3: worker i is pinned to the i-th entry, named after the physical card
    assert _plan([H200, H200], " 2, 3") == [("h200-gpu2", "h200", "2"), ("h200-gpu3", "h200", "3")]
    # CUDA stops at the first entry it cannot use, so extra entries are not GPUs and get no worker
    assert _plan([H200], "1,7") == [("h200-gpu1", "h200", "1")]
    with pytest.raises(UserError, match="CUDA_VISIBLE_DEVICES='0'"):
        plan_local_workers([H200, H200], "0")


def test_uuid_and_mig_entries_pin_by_uuid_and_name_by_its_first_digits():
    a = "GPU-8f3a2b1c-0d4e-4a5b-9c6d-7e8f90a1b2c3"
    b = "GPU-77aa9c01-1111-2222-3333-444455556666"
    assert _plan([H200, H200], f"{a},{b}") == [
        ("h200-gpu-8f3a2b1c", "h200", a),
        ("h200-gpu-77aa9c01", "h200", b),
    ]
    mig = "MIG-4b5d2ea9-6f1e-5a3b-8c7d-0e1f2a3b4c5d"
    assert _plan(["NVIDIA H100 80GB HBM3 MIG 1g.10gb"], mig) == [("h100-mig-4b5d2ea9", "h100", mig)]
    # two entries that share their first digits keep their whole UUIDs in the names, so names stay unique
    c = "GPU-8f3a2b1c-ffff-4a5b-9c6d-7e8f90a1b2c3"
    names = [n for n, _, _ in _plan([H200, H200], f"{a},{c}")]
    assert len(set(names)) == 2 and names[0] == "h200-" + a.lower()


def test_cpu_workers_only_without_a_gpu():
    assert _plan([], None, cpu_workers=3) == [
        ("cpu-0", "cpu", ""),
        ("cpu-1", "cpu", ""),
        ("cpu-2", "cpu", ""),
    ]
    assert _plan([H200], None, cpu_workers=3) == [("h200-gpu0", "h200", "0")]  # one per card, never more


def _configs(random: int, per_kernel: int) -> list:
    return [("random", {"a": i}) for i in range(random)] + [
        ("per_kernel_exhaustive", {"a": i}) for i in range(per_kernel)
    ]


def test_measure_order_puts_per_kernel_grids_first_and_cuts_the_tail():
    configs = _configs(230, 25)  # batches of 20: 00000-00010 random, 00011 mixed, 00012 per-kernel
    order = measure_order(configs, 20)
    names = [name for name, _ in order]
    whole = [f"{b:05d}" for b in (11, 12, *range(7))]
    parts = [f"{b:05d}.{j}" for b in range(7, 11) for j in range(TAIL_PARTS)]
    assert names == whole + parts
    ids = [row[0] for _, rows in order for row in rows]
    assert sorted(ids) == list(range(255))  # every sample once
    assert ids[35:] == list(range(220))  # after the per-kernel grids, sample-id order
    assert all(len(rows) == 5 for name, rows in order if "." in name)
    assert measure_order(configs, 20) == order  # stable: a rerun finds its shards
    # the parts are exactly the whole batches they were cut from
    cut = {name: [r[0] for r in rows] for name, rows in batches(configs, 20)}
    for b in range(7, 11):
        joined = [r[0] for name, rows in order if name.startswith(f"{b:05d}.") for r in rows]
        assert joined == cut[f"{b:05d}"]


def test_measure_order_leaves_small_batches_and_short_tails_whole():
    configs = _configs(60, 17)
    size = TAIL_MIN_SIZE - 1
    assert measure_order(configs, size) == sorted(
        batches(configs, size), key=lambda b: all(row[1] == "random" for row in b[1])
    )
    # a last batch of 2 rows is cut into 2 parts of 1, not 4 empty ones
    order = measure_order(_configs(66, 0), 16)
    assert [n for n, _ in order][-4:] == ["00003.2", "00003.3", "00004.0", "00004.1"]
    assert all(rows for _, rows in order)
    assert len(order) == 5 - TAIL_BATCHES + 3 * TAIL_PARTS + 2


def _shard(path: Path, order: list) -> None:
    """A shard holding exactly its batch's sample ids (whole batch: all its parts' ids)."""
    name = path.name.removeprefix("shard-").removesuffix(".parquet")
    ids = [r[0] for b, rows in order if b == name or b.split(".", 1)[0] == name for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"sample_id": ids}), path)


def test_a_whole_batch_measured_before_the_tail_was_cut_covers_its_parts(tmp_path):
    order = measure_order(_configs(200, 0), 20)  # 00006-00009 cut
    _shard(SweepFolder(tmp_path).shard_path("h200", "00009"), order)  # an older sweep measured 00009 whole
    _shard(SweepFolder(tmp_path).shard_path("h200", "00008.1"), order)
    _shard(SweepFolder(tmp_path).shard_path("h200", "00001"), order)
    todo, finished = pending_batches(tmp_path, "h200", order)
    assert finished == TAIL_PARTS + 2
    left = [name for name, _ in todo]
    assert "00001" not in left and "00008.1" not in left and not any(n.startswith("00009") for n in left)
    assert "00008.0" in left and "00009" not in left and len(left) == len(order) - finished


def _timing(out: Path) -> dict:
    return json.loads((out / "timing.json").read_text())


def _shard_times(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (out / "shards/gpu_class=cpu").glob("*.parquet")}


@pytest.mark.slow
def test_two_workers_of_one_class_measure_together_and_finish_within_a_batch(tmp_path, write_spec):
    delay, size = 0.05, 16
    spec = write_spec(
        samples=66, samplers=["random", "per_kernel_exhaustive"], batch_size=size, options={"delay": delay}
    )
    out = tmp_path / "out"
    result = run_cli("sweep", str(spec), "--out", str(out), "--workers-per-class", "2", cwd=tmp_path)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    assert "local cluster: cpu-0, cpu-1" in result.stdout
    assert (
        "worker cpu-0:" in result.stdout and "worker cpu-1:" in result.stdout
    )  # both built before the clock
    timing = _timing(out)
    per = timing["per_worker"]
    assert set(per) == {"cpu-0", "cpu-1"} and timing["workers"] == 2
    assert all(w["rows"] >= 20 for w in per.values()) and sum(w["rows"] for w in per.values()) == 66 + 17
    # both measure together (each starts before the other has finished: an order, not a duration) and end
    # within one whole batch of each other (a batch measured in the same run, so a loaded machine scales both)
    batch_s = max(size * delay, *(w["longest_batch_s"] for w in per.values()))
    assert max(w["first_start_s"] for w in per.values()) < min(w["last_end_s"] for w in per.values())
    assert timing["finish_spread_s"]["cpu"] <= batch_s, timing
    merged = pq.read_table(out / "merged", partitioning="hive").to_pandas()
    assert merged.groupby("worker").size().to_dict() == {k: w["rows"] for k, w in per.items()}
    assert sorted(merged["sample_id"]) == list(range(83))
    # a rerun finds every shard, tail parts included, and measures nothing
    before = _shard_times(out)
    assert any("." in name.removeprefix("shard-").removesuffix(".parquet") for name in before)
    again = run_cli("sweep", str(spec), "--out", str(out), "--workers-per-class", "2", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{len(before)} finished shard(s) kept; 0 batch(es) to measure" in again.stdout
    assert _shard_times(out) == before


@pytest.mark.slow
def test_a_slower_card_gets_fewer_batches_and_the_two_still_end_together(tmp_path, write_spec):
    delay, size = 0.02, 16
    spec = write_spec(
        samples=66,
        samplers=["random", "per_kernel_exhaustive"],
        batch_size=size,
        options={"delay": delay, "slow": {"cpu-1": 3.0}},
    )
    out = tmp_path / "out"
    result = run_cli("sweep", str(spec), "--out", str(out), "--workers-per-class", "2", cwd=tmp_path)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    per = _timing(out)["per_worker"]
    assert per["cpu-0"]["rows"] > per["cpu-1"]["rows"] > 0
    # a static half-and-half split would leave cpu-0 idle for about half the run; fed batch by batch, the
    # two end within one of cpu-1's (slow) batches
    assert _timing(out)["finish_spread_s"]["cpu"] <= per["cpu-1"]["longest_batch_s"] + 0.1


def test_card_comparison_tells_an_offset_from_noise():
    from benchmarks.multi_gpu_scaling import compare_cards

    rng = np.random.default_rng(0)
    base = rng.uniform(3, 20, 200)
    rows = []
    for card, factor in (("h200-gpu0", 1.0), ("h200-gpu1", 1.0), ("h200-gpu2", 1.05)):
        for p in ("a", "b"):
            noise = 1 + 0.003 * rng.standard_normal(200)
            rows += [
                {"sample_id": i, "worker": card, "pass": p, "status": "ok", "total_ms": t, "ms.k": t / 2}
                for i, t in enumerate(base * factor * noise)
            ]
    result = compare_cards(pd.DataFrame(rows))
    assert result["ok_on_all"] == 200 and result["cards"] == ["h200-gpu0", "h200-gpu1", "h200-gpu2"]
    assert abs(result["between"]["h200-gpu1/h200-gpu0"]["median"] - 1) < 0.002
    assert abs(result["between"]["h200-gpu2/h200-gpu0"]["median"] - 1.05) < 0.002
    assert result["per_kernel_median_ratio"]["h200-gpu2/h200-gpu0"]["k"] == pytest.approx(1.05, abs=0.01)
    assert result["verdict"][0].startswith("h200-gpu1/h200-gpu0: agree within noise")
    assert result["verdict"][1].startswith("h200-gpu2/h200-gpu0: DIFFER")


@pytest.mark.slow
def test_scaling_benchmark_runs_its_steps_on_the_cpu(tmp_path):
    """benchmarks/multi_gpu_scaling.py --cpu: everything but the GPU (two CPU workers stand in for cards)."""
    out, work = tmp_path / "out", tmp_path / "work"
    cmd = [sys.executable, str(REPO / "benchmarks/multi_gpu_scaling.py"), "--cpu", "--samples", "32"]
    cmd += ["--agree", "4", "--out", str(out), "--work", str(work), "--budget-s", "400"]
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))  # keep a --target site
    env = {**os.environ, "PYTHONPATH": path, "LAUNCHTUNE_RESULTS": str(tmp_path / "results")}
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=420)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    assert "scaling: " in result.stdout and "cpu-1/cpu-0: " in result.stdout
    scaling = json.loads((out / "scaling.json").read_text())
    one, two = scaling["runs"]
    assert one["timing"]["rows"] == two["timing"]["rows"] == 32
    assert set(one["timing"]["per_worker"]) == {"cpu-0"} and set(two["timing"]["per_worker"]) == {
        "cpu-0",
        "cpu-1",
    }
    assert scaling["scaling"]["speedup"] > 0 and set(scaling["multicast_env"]) >= {"NCCL_NVLS_ENABLE"}
    agree = pd.read_csv(out / "agreement.csv")
    assert len(agree) == 4 * 2 * 2 and set(agree["worker"]) == {"cpu-0", "cpu-1"}  # configs x cards x passes
    assert scaling["agreement"]["ok_on_all"] == 4


def _first_gpu_uuid() -> str | None:
    """UUID of CUDA device 0: from CuPy where it reports one, else from nvidia-smi by its PCI bus id."""
    import cupy

    raw = cupy.cuda.runtime.getDeviceProperties(0).get("uuid")
    if isinstance(raw, str) and raw.startswith("GPU-"):
        return raw
    if isinstance(raw, bytes) and len(raw) == 16:
        h = raw.hex()
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    bus = cupy.cuda.Device(0).pci_bus_id
    query = ["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader", "-i", bus]
    try:
        out = subprocess.run(query, capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return None
    return out if out.startswith("GPU-") else None


@pytest.mark.gpu
@pytest.mark.slow
def test_a_card_named_by_uuid_gets_one_pinned_worker_that_records_it(tmp_path):
    """The one-worker-per-GPU logic on a single GPU: the user's CUDA_VISIBLE_DEVICES (a UUID) is honoured. One
    card is measured in the sweep's own process (no Dask cluster), named as its worker would be."""
    uuid = _first_gpu_uuid()
    if uuid is None:
        pytest.skip("CuPy does not report the device UUID")
    from launchtune.kernels.device import gpu_class_of, visible_gpu_names

    cls = gpu_class_of(visible_gpu_names()[0])
    spec = tmp_path / "gpu.yaml"
    spec.write_text(
        "name: pinned\nworkload: cfd\ncase: inlet\nsize: 64x24\nbackend: cupy\nsamples: 20\nrepeats: 1\n"
        "batch_size: 10\nvalidate: {pool: 100, top_k: 1, repeats: 1}\n"
        "train: {hidden_layers: [8], max_epochs: 5}\n"
    )
    result = run_cli("sweep", str(spec), cwd=tmp_path, env={"CUDA_VISIBLE_DEVICES": uuid}, timeout=600)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    name = f"{cls}-gpu-{uuid[4:12].lower()}"
    assert f"one device ({name}): measuring in this process" in result.stdout
    assert "but it sees" not in result.stdout
    merged = pq.read_table(tmp_path / "results/pinned/merged", partitioning="hive").to_pandas()
    assert set(merged["worker"]) == {name} and set(merged["cuda_visible_devices"]) == {uuid}
    assert merged["pci_bus_id"].str.len().gt(0).all()
