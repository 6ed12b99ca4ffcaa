"""A live search (``launchtune sweep --strategy NAME --budget N``) end to end on the replay workload
(recorded times slept by local CPU workers): the budget spent exactly, a search's shards and journal, a
SIGTERM mid-search then the same command measuring nothing twice, one worker picking what the replay picks;
the Session's out-of-order answers and their replay (no cluster); bad input as one line before any cluster."""

from __future__ import annotations

import gzip
import itertools
import json
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from launchtune.pipeline.store.datasets import load_datasets
from launchtune.pipeline.strategies import get_strategy
from launchtune.pipeline.strategies.base import Session
from launchtune.pipeline.strategies.parallel import SimulatedAnswers
from launchtune.pipeline.strategies.replay import ReplayWorkload
from launchtune.pipeline.sweep.rehearsal import KILL_ENV
from tests.faults.test_interrupts import QUIET, _ends_with_one_line, _interrupt_when, _no_process_left
from tests.pipeline.conftest import one_line_error, run_cli, run_cli_here

NOISE = 1_000_003  # the replay noise seed of `launchtune strategies` (seed + this)


def _recorded(path: Path, ms: float = 1.0) -> Path:
    """A recorded sweep of 180 configurations of two kernels, times drawn once (seeded), 3 repeats each."""
    rng = np.random.default_rng(7)
    rows = []
    grid = itertools.product((1, 2, 4, 8, 16), (32, 64, 128, 256), (1, 2, 4), (32, 64, 128))
    for i, (ab, at, bb, bt) in enumerate(grid):
        a = ms * (1.0 + 0.1 * np.log2(ab) + abs(np.log2(at) - 6) * 0.2 + rng.uniform(0, 0.3))
        b = ms * (1.0 + 0.2 * abs(np.log2(bb) - 1) + abs(np.log2(bt) - 6) * 0.1 + rng.uniform(0, 0.3))
        total = a + b
        rows.append(
            {"sample_id": i, "gpu_class": "cpu", "status": "ok", "total_ms": total}
            | {"a.blocks": ab, "a.threads": at, "b.blocks": bb, "b.threads": bt, "ms.a": a, "ms.b": b}
            | {"total_times": list(total * rng.uniform(0.97, 1.03, 3))}
        )
    pd.DataFrame(rows).to_parquet(path)
    return path


def _spec(
    tmp_path: Path,
    dataset: Path,
    time_scale: float = 1.0,
    seed: int = 0,
    options: dict | None = None,
    **search,
) -> Path:
    spec = {
        "name": "live",
        "workload": "replay",
        "case": "x",
        "size": "8x4",
        "backend": "numpy",
        "gpu_classes": ["cpu"],
        "repeats": 7,
        "seed": seed,
        "options": {
            "dataset": str(dataset),
            "seed": seed + NOISE,
            "time_scale": time_scale,
            **(options or {}),
        },
        "validate": {"pool": 50, "top_k": 2, "repeats": 2},
        "train": {"hidden_layers": [8], "max_epochs": 20},
    }
    if search:
        spec["search"] = search
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _rows(out: Path) -> pd.DataFrame:
    return pq.read_table(out / "merged", partitioning="hive").to_pandas()


def _journal(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "search" / "cpu.jsonl").read_text().splitlines()]


def test_four_workers_spend_the_budget_exactly_into_search_shards(tmp_path):
    data = _recorded(tmp_path / "rec.parquet")
    # 40 ms a measurement; workers cpu-1..3 kill themselves in their second measurement, once each (cards lost
    # mid-search): each lost proposal is measured again on another worker, nothing else is lost or doubled
    kill = {"workers": ["cpu-1", "cpu-2", "cpu-3"], "after": 2, "dir": str(tmp_path)}
    spec = _spec(tmp_path, data, time_scale=20.0)
    out = tmp_path / "out"
    done = run_cli(
        "sweep", str(spec), "--strategy", "iterative", "--budget", "30", "--workers-per-class", "4",
        "--remeasure", "--out", str(out), cwd=tmp_path, timeout=400, env={KILL_ENV: json.dumps(kill)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = _rows(out)
    assert sorted(rows["sample_id"]) == list(range(30))  # exactly the budget, each proposal once
    assert len(rows.drop_duplicates(["a.blocks", "a.threads", "b.blocks", "b.threads"])) == 30
    assert set(rows["strategy"]) == {"iterative"} and set(rows["sampler"]) == {"search"}
    assert (rows["proposal_order"] == rows["sample_id"]).all()
    assert rows["proposal_round"].is_monotonic_increasing  # rounds only move on
    assert rows["worker"].nunique() >= 2  # the proposals were spread over the workers
    assert list(tmp_path.glob("cpu-*.killed"))  # workers did die mid-search (which ones: Dask's placement)
    journal = _journal(out)
    assert sorted(e["order"] for e in journal) == list(range(30))
    assert [e["event"] for e in journal] == sorted(e["event"] for e in journal)
    validation = json.loads((out / "validation.json").read_text())["cpu"]
    assert validation["model"] == "search:iterative"
    assert validation["search"]["measured"] == 30 and validation["search"]["workers"] == 4
    picked = validation["search"]["pick"]
    best = rows.loc[rows["total_ms"].idxmin()]
    assert validation["search"]["best_ms"] <= best["total_ms"] * 1.0000001
    assert picked == {k: int(best[k]) for k in picked}
    report = (out / "report.md").read_text()
    assert "search_trace.png" in report and (out / "figures" / "search_trace.png").is_file()


def test_one_worker_picks_what_the_replay_of_the_same_answers_picks(tmp_path):
    data = _recorded(tmp_path / "rec.parquet")
    spec = _spec(tmp_path, data, seed=3)
    out = tmp_path / "out"
    done = run_cli(
        "sweep", str(spec), "--strategy", "evolve", "--budget", "25", "--out", str(out), cwd=tmp_path,
        timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    replayed = run_cli_here(
        "strategies", "--dataset", str(data), "--strategy", "evolve", "--budget", "25", "--seed", "3",
        cwd=tmp_path,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    record = json.loads(replayed.stdout.splitlines()[-1])
    # one device: measured in the sweep's process; a search trains no models and re-measures nothing unless
    # asked, and its pick is the fastest configuration it measured
    assert "measuring in this process, without a Dask cluster" in done.stdout
    assert not (out / "validation.json").exists() and not (out / "models").exists()
    (entry,) = json.loads((out / "tuning_table.json").read_text())["entries"]
    assert entry["best"] == record["config"]
    report = (out / "report.md").read_text().splitlines()
    assert report[4] == "## The pick"  # the report leads with it, though nothing was re-measured
    assert report[6].startswith(
        "**cpu** (minimize time): the pick, the fastest of the 25 configurations measured"
    )
    assert "not re-measured against the default" in report[6]
    # and every proposal is the replay's, in the same order (one worker: answers in proposal order)
    dataset = load_datasets(data)[0]
    session = Session(ReplayWorkload(dataset, seed=3 + NOISE), 25, 3, repeats=7)
    get_strategy("evolve")(session)
    rows = _rows(out).sort_values("sample_id")
    names = session.names
    assert [tuple(r) for r in rows[names].to_numpy().tolist()] == [
        tuple(c[n] for n in names) for c in session.proposals
    ]
    assert [e["order"] for e in _journal(out)] == list(range(25))


@pytest.mark.parametrize("workers", ["4", "1"])  # 1: measured in the sweep's own process (cluster.inline)
def test_sigterm_mid_search_then_the_same_command_measures_only_the_rest(tmp_path, workers):
    data = _recorded(tmp_path / "rec.parquet")
    spec = _spec(tmp_path, data, time_scale=60.0)  # about 150 ms a measurement
    out = tmp_path / "out"
    args = ("sweep", str(spec), "--strategy", "evolve", "--budget", "40", "--workers-per-class", workers)
    args += ("--remeasure",)
    proc = run_cli(*args, "--out", str(out), cwd=tmp_path, env=QUIET, background=True, new_session=True)
    _interrupt_when(proc, "search cpu: 8 answers in", signal.SIGTERM, group=False)
    assert "SIGTERM" in _ends_with_one_line(proc, within=30)
    _no_process_left(proc.pid)
    first = sorted(int(p.stem.split("-")[-1]) for p in (out / "shards").rglob("shard-search-*.parquet"))
    assert 8 <= len(first) < 40 and not (out / "merged").exists()
    journal = _journal(out)
    again = run_cli(*args, "--out", str(out), cwd=tmp_path, timeout=400)
    assert again.returncode == 0, again.stderr[-3000:]
    rows = _rows(out)
    assert sorted(rows["sample_id"]) == list(range(40))
    assert len(rows.drop_duplicates(["a.blocks", "a.threads", "b.blocks", "b.threads"])) == 40
    search = json.loads((out / "validation.json").read_text())["cpu"]["search"]
    # every shard of the first run answered again from disk, the rest measured: nothing measured twice
    assert search["measured_now"] == 40 - len(first)
    assert search["replayed"] == len(journal)
    assert _journal(out)[: len(journal)] == journal  # the recorded order kept, the rest appended
    assert not list(out.rglob("*.incomplete-*")) and not list(out.rglob("*.tmp"))


def test_models_and_remeasure_asked_on_a_rerun_measure_nothing_again(tmp_path):
    data = _recorded(tmp_path / "rec.parquet")
    spec = _spec(tmp_path, data)
    out = tmp_path / "out"
    args = ("sweep", str(spec), "--strategy", "evolve", "--budget", "20", "--out", str(out))
    first = run_cli(*args, cwd=tmp_path, timeout=400)
    assert first.returncode == 0, first.stderr[-3000:]
    assert not (out / "validation.json").exists() and not (out / "models").exists()
    shards = {p: p.stat().st_mtime_ns for p in (out / "shards").rglob("*.parquet")}
    again = run_cli(*args, "--train-models", "--remeasure", cwd=tmp_path, timeout=400)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {p: p.stat().st_mtime_ns for p in (out / "shards").rglob("*.parquet")} == shards
    search = json.loads((out / "validation.json").read_text())["cpu"]["search"]
    assert search["measured_now"] == 0 and search["replayed"] == 20
    assert (out / "models" / "metrics.json").is_file()


class _OutOfOrder:
    """Answers of a replay arriving in a fixed shuffled order, ``width`` in flight."""

    def __init__(self, workload, width: int, seed: int) -> None:
        self.workload, self.width = workload, width
        self.rng = np.random.default_rng(seed)
        self.running: list = []

    def submit(self, order, config, round):
        t = self.workload.run(config, 7)
        from launchtune.pipeline.strategies.base import Answer

        self.running.append(Answer(order, float(t.total), dict(t.kernels)))

    def collect(self, event, block):
        if not block or not self.running:
            return []
        k = int(self.rng.integers(1, len(self.running) + 1))
        picked = [self.running.pop(int(self.rng.integers(len(self.running)))) for _ in range(k)]
        return picked

    def recorded(self, event):
        return False


@pytest.mark.parametrize("strategy", ["evolve", "iterative", "bayes", "random_mlp"])
def test_out_of_order_answers_keep_the_budget_and_replay_to_the_same_proposals(tmp_path, strategy):
    from launchtune.pipeline.sweep.search import ResumedAnswers

    dataset = load_datasets(_recorded(tmp_path / "rec.parquet"))[0]
    live = Session(
        ReplayWorkload(dataset, seed=NOISE),
        30,
        0,
        answers=_OutOfOrder(ReplayWorkload(dataset, seed=NOISE), 4, 1),
    )
    get_strategy(strategy)(live)
    live.settle()
    assert live.used == 30 and len(live.history) == 30 and live.pending == 0
    assert len({tuple(c.values()) for c in live.proposals}) == 30  # nothing proposed twice
    assert sorted(o for _, o in live.deliveries) == list(range(30))
    # a rerun answered from the recording at the same delivery points proposes exactly the same
    on_disk = {o: (live.proposals[o], next(a for a in _answers(live) if a.order == o)) for o in range(30)}

    class _Nothing:
        width, cls, journal = 4, "cpu", None

        def submit(self, *a):
            raise AssertionError("a recorded proposal was measured again")

        def collect(self, event, block):
            return []

    rerun = Session(
        ReplayWorkload(dataset, seed=NOISE),
        30,
        0,
        answers=ResumedAnswers(_Nothing(), live.deliveries, on_disk),
    )
    get_strategy(strategy)(rerun)
    rerun.settle()
    assert rerun.proposals == live.proposals and rerun.deliveries == live.deliveries


def _answers(session):
    from launchtune.pipeline.strategies.base import Answer

    return [
        Answer(o, m.time, m.kernels) for (_, o), m in zip(session.deliveries, session.history, strict=True)
    ]


def test_one_simulated_worker_is_the_sequential_run_and_four_keep_the_budget(tmp_path):
    dataset = load_datasets(_recorded(tmp_path / "rec.parquet"))[0]
    runs = {}
    for width in (None, 1, 4):
        w = ReplayWorkload(dataset, seed=NOISE)
        answers = None if width is None else SimulatedAnswers(w, 7, width)
        s = Session(w, 40, 0, answers=answers)
        get_strategy("evolve")(s)
        s.settle()
        runs[width] = s
    assert runs[1].proposals == runs[None].proposals
    assert runs[4].used == 40 and len(runs[4].history) == 40
    assert max(runs[4].rounds) < max(runs[1].rounds)  # several proposals per round on four workers


# --------------------------------------------------------------------------------------------- bad input
@pytest.fixture
def bad(tmp_path):
    data = _recorded(tmp_path / "rec.parquet")
    spec = _spec(tmp_path, data)

    def run(*args: str, planned: bool = False) -> str:
        # refused before any cluster: in this process; once planned, a cluster started: a process of its own
        runner = run_cli if planned else run_cli_here
        result = runner("sweep", str(spec), "--out", str(tmp_path / "out"), *args, cwd=tmp_path)
        line = one_line_error(result)
        if planned:  # refused once the plan named the space's parameters: nothing was measured
            assert not list((tmp_path / "out").glob("shards/**/*.parquet"))
        else:
            assert not (tmp_path / "out").exists()  # nothing made, no cluster started
        return line

    return run, tmp_path


def test_bad_search_input_is_one_line_naming_the_flag(bad):
    run, tmp_path = bad
    assert "--strategy" in run("--strategy", "nope", "--budget", "10")
    assert "--budget" in run("--strategy", "evolve", "--budget", "0")
    assert "--budget" in run("--strategy", "evolve", "--budget", "50001")  # past LIMITS["search.budget"]
    # a budget over a space (this one holds 180) is no flag error: the plan does not build the workload to
    # know its space; the search measures the whole space and says so (strategies.base.Session.capped)
    assert "--budget" in run("--budget", "10")  # no --strategy
    assert "--prior" in run("--strategy", "transfer", "--budget", "10")  # transfer without data
    assert "--prior" in run("--strategy", "transfer", "--budget", "10", "--prior", str(tmp_path / "none"))
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(gzip.compress(b"{not json"))
    assert "--prior" in run("--strategy", "transfer", "--budget", "10", "--prior", str(broken))
    other = tmp_path / "other.parquet"
    pd.DataFrame({"gpu_class": ["x"], "status": ["ok"], "total_ms": [1.0], "k.blocks": [1]}).to_parquet(other)
    line = run("--strategy", "kt:genetic_algorithm", "--budget", "10")
    assert "--strategy" in line and "replay" in line
    # its parameters are checked against the plan's, which the plan task on a worker knows (sweep.run)
    assert "--prior" in run("--strategy", "transfer", "--budget", "10", "--prior", str(other), planned=True)


def test_a_bad_search_block_in_the_spec_names_its_field(tmp_path):
    data = _recorded(tmp_path / "rec.parquet")
    for search, field in (
        ({"strategy": "nope", "budget": 5}, "search.strategy"),
        ({"strategy": "evolve", "budget": -1}, "search.budget"),
        ({"strategy": "evolve", "budget": 5, "prior": 3}, "search.prior"),
    ):
        spec = _spec(tmp_path, data, **search)
        line = one_line_error(run_cli_here("sweep", str(spec), "--out", str(tmp_path / "o"), cwd=tmp_path))
        assert field in line, line


def test_a_search_without_a_budget_spends_the_default(tmp_path):
    """No --budget and no search.budget: the default budget; either one given wins over it."""
    from launchtune.pipeline.store.spec import DEFAULT_BUDGET
    from launchtune.pipeline.sweep.plan import plan_sweep

    data = _recorded(tmp_path / "rec.parquet")
    (tmp_path / "s").mkdir()
    plain, searched = _spec(tmp_path, data), _spec(tmp_path / "s", data, strategy="evolve")
    budgets = [
        plan_sweep(plain, out=tmp_path / "a", strategy="evolve").spec.search.budget,
        plan_sweep(searched, out=tmp_path / "b").spec.search.budget,
        plan_sweep(searched, out=tmp_path / "c", budget=30).spec.search.budget,
        plan_sweep(plain, out=tmp_path / "d", strategy="evolve", budget=30).spec.search.budget,
    ]
    assert budgets == [DEFAULT_BUDGET, DEFAULT_BUDGET, 30, 30]
