"""``benchmarks/time_to_pick.py`` on the CPU: its table and README row from a small made-up JSON (the figures
follow the data, a killed run is a bound, the picks' verdict comes from the re-measured rounds), the order of
its runs, a killed run's pick from its Kernel Tuner cache, and its dry run end to end (each run's process
builds its call: launchtune's up to its no-GPU refusal, Kernel Tuner's bound to its signature)."""

from __future__ import annotations

import json

import pytest

from benchmarks import time_to_pick as ttp
from launchtune.pipeline.errors import UserError
from tools import blocks

HEAT_PICK = {"block_size_x": 32, "block_size_y": 16, "tile_x": 4, "tile_y": 2, "steps_per_launch": 4}
HEAT_KT = {"block_size_x": 64, "block_size_y": 8, "tile_x": 2, "tile_y": 2, "steps_per_launch": 6}
CONV = {"filter_height": 3, "filter_width": 3, "block_size_x": 16, "block_size_y": 1, "tile_size_x": 1}


def fake() -> dict:
    """Heat at 100: ours 4 s against Kernel Tuner's 10 s, ours' pick 0.9x theirs every round; convolution at
    100: Kernel Tuner killed at 200 s with 30 rows in its cache, ours 50 s, the same pick; two examples."""
    run = {"seed": 0, "budget": 100, "status": "ok", "rc": 0, "rows": 100, "ok": 100}
    return {
        "settings": {"lang": "cupy", "ours_strategy": "default", "rounds": 3, "repeats": 7, "dry_run": False},
        "device": {"device_name": "NVIDIA H100 80GB HBM3"},
        "kernel_tuner": "1.5.0",
        "runs": [
            {
                **run,
                "case": "heat",
                "tool": "launchtune",
                "process_s": 5.5,
                "call_s": 4.0,
                "pick": HEAT_PICK,
                "remeasure_index": 0,
            },
            {
                **run,
                "case": "heat",
                "tool": "kernel_tuner",
                "call_s": 10.0,
                "pick": HEAT_KT,
                "remeasure_index": 1,
                "ok": 66,
                "rows": 70,
            },
            {
                **run,
                "case": "convolution",
                "tool": "kernel_tuner",
                "status": "timeout",
                "rc": -9,
                "call_s_at_least": 200.0,
                "pick": CONV,
                "partial": True,
                "rows": 30,
                "ok": 28,
                "remeasure_index": 0,
            },
            {
                **run,
                "case": "convolution",
                "tool": "launchtune",
                "call_s": 50.0,
                "pick": CONV,
                "remeasure_index": 0,
            },
        ],  # fmt: skip
        "remeasure": {
            "heat": {"times": [[0.9, 1.0], [0.918, 1.02], [0.882, 0.98]]},
            "convolution": {"times": [[2.0], [2.1], [1.9]]},
        },
        "examples": [
            {"example": "vector_add", "tool": "kt", "seconds": 8.0, "rc": 0},
            {"example": "vector_add", "tool": "launchtune", "seconds": 6.0, "rc": 0},
            {"example": "stencil", "tool": "launchtune", "seconds": 9.0, "rc": 0},
            {"example": "stencil", "tool": "kt", "seconds": 6.0, "rc": 0},
        ],
    }


def _row(text: str, start: str) -> list[str]:
    (line,) = [x for x in text.splitlines() if x.startswith(start)]
    return [c.strip() for c in line.strip("|").split("|")]


def test_the_table_follows_the_data():
    text = ttp.table(fake())
    assert text.startswith("On one NVIDIA H100 80GB HBM3, Kernel Tuner 1.5.0: our `default` search")
    heat = _row(text, "| heat |")
    assert heat[3:8] == ["4.0", "10.0", "0.40", "0.900 [0.900, 0.900]", "faster"]
    assert heat[8:] == ["5.5; -", "100/100; 66/70", "yes"]
    conv = _row(text, "| convolution |")  # Kernel Tuner killed: its time a bound, its pick its cache's
    assert conv[3:8] == [
        "50.0",
        "> 200 (timeout)",
        "< 0.25",
        "1.000 [1.000, 1.000]",
        "no measurable difference",
    ]
    assert conv[8:] == ["-; -", "100/100; 28/30*", "yes, against its pick so far"]
    assert _row(text, "| vector_add |")[1:] == ["6.0", "8.0", "0.75", "yes"]
    assert _row(text, "| stencil |")[1:] == ["9.0", "6.0", "1.50", "no"]
    data = fake()
    data["runs"][0]["call_s"] = 6.0  # over half Kernel Tuner's time: no longer met
    assert _row(ttp.table(data), "| heat |")[5] == "0.60" and _row(ttp.table(data), "| heat |")[-1] == "no"


def test_a_slower_pick_fails_the_row_and_the_readme_row_says_each_case():
    data = fake()
    data["remeasure"]["heat"]["times"] = [[1.1, 1.0], [1.12, 1.02], [1.08, 0.98]]
    heat = _row(ttp.table(data), "| heat |")
    assert heat[7] == "slower" and heat[-1] == "no"
    row = ttp.readme_row(fake())
    assert row.startswith(
        "| time to a tuned configuration against Kernel Tuner 1.5.0 on one NVIDIA H100 80GB HBM3"
    )
    assert "heat at 100 (seed 0): 0.40x, pick 0.900x theirs" in row
    assert "convolution at 100 (seed 0): < 0.25x, pick 1.000x theirs" in row
    assert "its vector_add example 0.75x; its stencil example 1.50x" in row


def test_the_block_renders_the_committed_json_and_names_it_when_missing(tmp_path):
    with pytest.raises(blocks.ReadmeError, match="time_to_pick.json: missing"):
        blocks.BLOCKS["time_to_pick"](tmp_path)
    path = tmp_path / blocks.TIME_TO_PICK
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(fake()))
    assert blocks.BLOCKS["time_to_pick"](tmp_path) == ttp.table(fake())
    assert blocks._time_to_pick_row(tmp_path) == ttp.readme_row(fake())


def test_runs_interleave_the_tools_seed_by_seed_and_cases_are_checked():
    runs = ttp.plan_runs(ttp.parse_cases("heat@100,convolution@400"), [0, 1])
    assert [(r["case"], r["budget"], r["seed"], r["tool"]) for r in runs[:4]] == [
        ("heat", 100, 0, "launchtune"),
        ("heat", 100, 0, "kernel_tuner"),
        ("convolution", 400, 0, "launchtune"),
        ("convolution", 400, 0, "kernel_tuner"),
    ]
    assert [r["seed"] for r in runs[4:]] == [1, 1, 1, 1]
    for bad in ("matmul@100", "heat", "heat@0", ""):
        with pytest.raises(UserError, match="--cases"):
            ttp.parse_cases(bad)


def test_a_killed_runs_pick_is_the_best_its_open_cache_held(tmp_path):
    """Kernel Tuner leaves its cache open while it tunes (no closing braces): the best row so far, by the
    case's objective (heat: time per step), failed rows counted but not picked."""
    cache = tmp_path / "cache.json"
    entry = dict.fromkeys(("block_size_x", "block_size_y", "tile_x", "tile_y"), 1)
    rows = {
        "a": {**entry, "steps_per_launch": 1, "time": 0.5},
        "b": {**entry, "steps_per_launch": 4, "time": 1.2},  # 0.3 ms a step: the best
        "c": {**entry, "steps_per_launch": 8, "time": "InvalidConfig"},
    }
    head = {"tune_params_keys": [*entry, "steps_per_launch"], "cache": {}}
    text = (
        json.dumps(head)[: -len("{}}")]
        + "{\n"
        + ",\n".join(f'"{k}": {json.dumps(v)}' for k, v in rows.items())
    )
    cache.write_text(text + ",")
    got = ttp._partial_pick("heat", cache)
    assert got["pick"]["steps_per_launch"] == 4 and got["pick_value"] == pytest.approx(0.3)
    assert (got["rows"], got["ok"], got["partial"]) == (3, 2, True)
    assert ttp._partial_pick("heat", tmp_path / "none.json")["pick"] is None


def test_the_picks_are_remeasured_on_the_workload_launchtunes_run_wrote(tmp_path, monkeypatch):
    """On the CPU stand-in of the kernel workload (``tests.api.stand_in``, a launch takes ``fake_ms`` of its
    configuration): the spec ``tune_kernel`` wrote is found in the run's folder, each distinct pick is timed
    once a round, and a pick two runs share is one column."""
    import numpy as np

    import launchtune
    from launchtune import api
    from tests.api.stand_in import fake_ms
    from tests.kernel.conftest import SOURCE

    monkeypatch.setattr(api, "KERNEL_WORKLOAD", "tests.api.stand_in:make")
    monkeypatch.setenv("LAUNCHTUNE_RESULTS", str(tmp_path / "results"))
    tune = {"block_size_x": [32, 64], "tile": [1, 2], "wrong": [0, 1]}
    n = 1000
    arguments = [np.zeros(n, np.float32), np.ones(n, np.float32), np.int32(n)]
    launchtune.tune_kernel(
        "scale", SOURCE, n, arguments, tune, grid_div_x=["block_size_x", "tile"], quiet=True
    )
    spec = ttp._spec_of(tmp_path)
    assert spec is not None and spec.endswith("sweep.yaml")
    best, other = {"block_size_x": 64, "tile": 2, "wrong": 0}, {"block_size_x": 32, "tile": 1, "wrong": 0}
    runs = [
        {"case": "heat", "tool": "launchtune", "pick": best},
        {"case": "heat", "tool": "kernel_tuner", "pick": other},
        {"case": "heat", "tool": "kernel_tuner", "pick": best},
        {"case": "heat", "tool": "launchtune", "pick": None},  # a run with no pick is not timed
        {"case": "heat", "tool": "kernel_tuner", "pick": {**best, "block_size_x": 48}},  # outside: said
    ]
    said: list[str] = []
    out = ttp.remeasure(runs, {"heat": spec}, rounds=3, repeats=2, log=said.append)
    assert out["heat"]["configs"] == [best, other]
    assert out["heat"]["times"] == [[fake_ms(best), fake_ms(other)]] * 3
    assert [r.get("remeasured") for r in runs] == [fake_ms(best), fake_ms(other), fake_ms(best), None, None]
    assert "remeasure_index" not in runs[-1]
    assert said[0].startswith("re-measure heat: {'block_size_x': 48") and "left out" in said[0]
    assert said[1].startswith("re-measure heat: 2 picks, 3 rounds in ")


def test_the_dry_run_builds_both_calls_in_their_own_processes(tmp_path, capsys):
    assert ttp.main(["--out", str(tmp_path), "--dry-run", "--cases", "heat@5", "--examples", ""]) == 0
    data = json.loads((tmp_path / "time_to_pick.json").read_text())
    assert [(r["tool"], r["status"]) for r in data["runs"]] == [("launchtune", "ok"), ("kernel_tuner", "ok")]
    assert all(r["pick"]["steps_per_launch"] == 1 for r in data["runs"])  # the stand-in: the first values
    assert data["heat_space"] == {"kernel_tuner": 525, "launchtune": 525}  # the call is heat.yaml's space
    assert "dry run: benchmarks.time_to_pick: 2 runs built their calls" in capsys.readouterr().out
    assert (tmp_path / "table.md").read_text().startswith("Dry run (stand-in picks, nothing measured)")
    with pytest.raises(UserError, match="holds runs/"):
        ttp.main(["--out", str(tmp_path), "--dry-run", "--cases", "heat@5", "--examples", ""])


def test_a_sigterm_ends_the_run_under_way_with_this_process():
    """The GPU script's ``timeout`` ends the parent with SIGTERM; the run's own session ends with it."""
    import subprocess

    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    ttp._RUNNING[:] = [proc.pid]
    try:
        with pytest.raises(SystemExit) as exc:
            ttp._end_running(15, None)
        assert exc.value.code == 143
        assert proc.wait(timeout=10) == -9
    finally:
        ttp._RUNNING.clear()
        if proc.poll() is None:
            proc.kill()
