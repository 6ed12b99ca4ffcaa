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
    assert "Objective: minimize ms_per_step (the workload's)" in text
    assert "| best recorded in the sweep (ms per step; time in ms) |" in text
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


def test_a_maximised_objective_reads_in_its_own_unit_with_the_time_beside_it():
    """``maximize: gflops``: the cost is the reciprocal, but every figure the user reads is GFLOP/s."""
    from launchtune.kernels.objective import Objective
    from launchtune.pipeline.results.report import remeasure_line

    frame = _frame().assign(objective=[1 / 100, 1 / 250, 1 / 400, 1 / 300])  # GFLOP/s 100, 250, 400, 300
    plan = {
        "params": PARAMS,
        "default": {"block_size_x": 32, "steps": 1},
        "objective": {"maximize": "gflops"},
    }
    default = {"config": {"block_size_x": 32, "steps": 1}, "status": "ok", "total_ms": 0.1, "objective": 0.01}
    pick = {"config": {"block_size_x": 32, "steps": 4}, "status": "ok", "total_ms": 0.2, "objective": 1 / 400}
    comparison = {
        "ratio": 0.25,
        "low": 0.24,
        "high": 0.26,
        "verdict": "faster",
        "rounds": 21,
        "confidence": 0.95,
    }
    validation = {"h100": {"candidates": [{**pick, "predicted_ms": 0.003}], "default": default,
                           "comparison": comparison, "backend": "cupy"}}  # fmt: skip
    summary = class_summary(frame, "h100", plan, {}, validation)
    report = {"sweep_id": "conv", "workload": "kernel", "case": "conv", "size": "64x64", "seed": 0,
              "created": "now", "merged_rows": 4, "classes": {"h100": summary}, "models": {},
              "figures": []}  # fmt: skip
    text = render(report)
    assert (
        "**h100** (maximize gflops): the pick by the model, re-measured, 400 GFLOP/s (0.2 ms); the default, "
        in text
    )
    assert "re-measured, 100 GFLOP/s (0.1 ms); the pick against the default: 0.250x [0.240, 0.260]" in text
    assert "(the default's GFLOP/s / the pick's)" in text
    assert "| **GFLOP/s** | 100 re-measured | 400 recorded | 400 re-measured |" in text
    assert "| time (ms) | 0.1 | 0.2 | 0.2 |" in text
    assert "| best recorded in the sweep (GFLOP/s; time in ms) |" in text
    assert "| 400 (0.2 ms) | 100 (0.1 ms) | 400 (0.2 ms) |" in text
    assert " ms (" not in text.replace("(0.", "")  # no cost printed as milliseconds
    line = remeasure_line(pick, default, comparison, "cupy", plan["objective"])
    assert line.startswith("predicted best 400 GFLOP/s, 0.2 ms, default 100 GFLOP/s, 0.1 ms; 0.250x [")
    assert Objective("gflops", True).show(1 / 5508) == "5508 GFLOP/s"
    assert Objective("ms_per_step").show(1.5) == "1.5 ms per step" and Objective().show(None) == "n/a"
