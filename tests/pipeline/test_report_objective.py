"""The report of a sweep whose kernel spec states an objective and measured energy: its classes rank by the
objective's cost (not the time), it names the objective, and a section gives the pick under each of time and
energy with the Pareto front; the front itself on hand-made points."""

from __future__ import annotations

import pandas as pd

from launchtune.pipeline.results.energy import pareto_front
from launchtune.pipeline.results.markdown import render
from launchtune.pipeline.results.report import class_summary, tuning_entry

PARAMS = ["block_size_x", "steps"]


def test_the_pareto_front_keeps_what_nothing_beats_on_both():
    times = [1.0, 2.0, 1.5, 3.0, 1.0, 2.5]
    energy = [9.0, 4.0, 8.0, 1.0, 10.0, 4.0]
    assert pareto_front(times, energy) == [0, 2, 1, 3]  # 4 ties 0's time with more energy; 5 is beaten by 1


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "gpu_class": "h100",
            "status": "ok",
            "device_name": "NVIDIA H100",
            "device_class": "h100",
            "backend": "cupy",
            "sample_id": [0, 1, 2, 3],
            "sampler": "random",
            "block_size_x": [32, 64, 32, 64],
            "steps": [1, 1, 4, 4],
            "total_ms": [0.10, 0.09, 0.20, 0.30],  # fastest launch: 64, 1 step
            "objective": [0.10, 0.09, 0.05, 0.075],  # ms per step: 32 with 4 steps
            "energy_mJ": [40.0, 42.0, 70.0, 95.0],
            "power_W": [400.0, 466.0, 350.0, 316.0],
        }
    )


def test_a_report_ranks_by_the_objective_and_names_the_picks_under_time_and_energy():
    plan = {
        "params": PARAMS,
        "default": {"block_size_x": 32, "steps": 1},
        "objective": {"minimize": "ms_per_step"},
    }
    summary = class_summary(_frame(), "h100", plan, {}, None)
    assert summary["best_sampled_config"] == {"block_size_x": 32, "steps": 4}
    assert summary["best_sampled_ms"] == 0.05 and summary["objective"] == {"minimize": "ms_per_step"}
    e = summary["energy"]
    assert e["time_pick"]["config"] == {"block_size_x": 64, "steps": 1}
    assert e["energy_pick"]["config"] == {"block_size_x": 32, "steps": 1} and len(e["front"]) == 2
    report = {"sweep_id": "heat", "workload": "kernel", "case": "heat", "size": "4096x4096", "seed": 0,
              "created": "now", "merged_rows": 4, "classes": {"h100": summary}, "models": {},
              "figures": []}  # fmt: skip
    text = render(report)
    assert "Objective: minimize ms_per_step (the kernel spec's)" in text
    assert "the pick under minimize time 0.09 ms, 42 mJ (block_size_x=64, steps=1)" in text
    assert "under minimize energy_mJ 0.1 ms, 40 mJ (block_size_x=32, steps=1); 2 on the Pareto front" in text


def test_the_tuning_table_entry_is_the_objectives_best_and_says_so():
    plan = {
        "params": PARAMS,
        "default": {"block_size_x": 32, "steps": 1},
        "objective": {"minimize": "ms_per_step"},
    }

    class Spec:
        workload, case, size = "kernel", "heat", "4096x4096"

    entry = tuning_entry(_frame(), "h100", Spec, plan, None)
    assert entry["best"] == {"block_size_x": 32, "steps": 4} and entry["best_ms"] == 0.05
    assert entry["objective"] == {"minimize": "ms_per_step"}
