"""Every loop that waits or searches is bounded, and every value that sizes work or seeds a library is
checked against its limit before anything starts: a strategy given a budget over its space measures the
space and says so; a workload option past its limit, a seed past scikit-learn's, a wait limit of 1e300 are
one line naming the field; a local worker that stays dead ends the sweep with one line naming it, long before
the wait limit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from launchtune.kernels.workload import SEED_MAX, WorkloadError
from launchtune.pipeline.cluster.waits import GONE_S, ClusterFailure, result
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.spec import parse_spec
from launchtune.pipeline.sweep.measure import _check_workers
from tests.pipeline.conftest import base_spec, one_line_error, run_cli, run_cli_here
from tests.strategies.conftest import write_cache

CFD = {"workload": "cfd", "case": "inlet", "size": "208x64"}


@pytest.mark.parametrize("strategy", ["evolve", "iterative", "bayes", "random", "transfer"])
def test_a_budget_over_the_space_measures_the_space_and_says_so(tmp_path, strategy):
    caches = tmp_path / "caches"
    caches.mkdir()
    write_cache(caches / "A100.json.gz", "NVIDIA A100-PCIE-40GB")
    write_cache(caches / "A4000.json.gz", "NVIDIA RTX A4000", gpu_shift=0.5, seed=1)
    # the cache holds 60 configurations; these strategies spun forever at any budget over it
    result = run_cli_here(
        "strategies",
        "--dataset",
        str(caches),
        "--gpu",
        "A100",
        "--strategy",
        strategy,
        "--budget",
        "1000",
        cwd=tmp_path,
        timeout=300,  # only a hang takes this long (the timer's signal stops a spinning loop)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = yaml.safe_load(result.stdout.strip().splitlines()[-1])
    assert record["measured"] == 60 and record["space"] == 60 and record["budget"] == 1000
    assert "is more than the 60 distinct candidates of A100: the whole space was measured" in result.stderr


@pytest.mark.parametrize(
    "options, match",
    [
        ({"smoothing": 10**9}, "spec.yaml: options.smoothing: must be an integer from 0 to 10,000"),
        ({"smoothing": 2.5}, "spec.yaml: options.smoothing: must be an integer"),
        ({"perturb": float("nan")}, "spec.yaml: options.perturb: must be a number from 0 to 0.5 (got nan)"),
        ({"perturb": "0.1"}, "spec.yaml: options.perturb: must be a number"),
        ({"seed": 2**32}, "spec.yaml: options.seed: must be an integer from 0 to 4,294,967,295"),
        ({"seed": True}, "spec.yaml: options.seed: must be an integer"),
        ({"scheme": {"limiter": "nosuch"}}, "spec.yaml: options.scheme.limiter: must be one of"),
        ({"scheme": {"stages": 7}}, "spec.yaml: options.scheme.stages: must be an integer from 1 to 6"),
        ({"scheme": {"cfl": float("inf")}}, "spec.yaml: options.scheme.cfl: must be a number"),
        ({"scheme": {"bogus": 1}}, "spec.yaml: options.scheme.bogus: unknown field 'bogus'"),
        ({"scheme": [1]}, "spec.yaml: options.scheme: must be a mapping"),
        ({"space": ["paper"]}, "spec.yaml: options.space: unknown space preset"),
    ],
)
def test_a_workload_option_past_its_limit_or_of_the_wrong_type_names_the_field(options, match):
    with pytest.raises(UserError, match=re.escape(match)):
        parse_spec(base_spec(**CFD, options=options), "spec.yaml")


def test_options_within_their_limits_pass_and_a_scheme_mapping_builds():
    from launchtune.kernels.cfd.workload import make_workload

    options = {
        "smoothing": 3,
        "perturb": 0.5,
        "seed": SEED_MAX,
        "scheme": {"limiter": "van_leer", "stages": 2},
    }
    assert parse_spec(base_spec(**CFD, options=options), "spec.yaml").options == options
    work = make_workload("inlet", "16x8", "numpy", **options)
    assert work.solver.scheme.limiter == "van_leer" and work.solver.scheme.stages == 2


@pytest.mark.parametrize(
    "size, match",
    [
        ("inf", "size 'inf' is not a number of unknowns"),
        ("1e10", "size '1e10': at most 2,147,483,647 unknowns"),
        ("nan", "size 'nan' is not a number of unknowns"),
    ],
)
def test_the_tridiagonal_cli_refuses_a_size_it_could_not_allocate(size, match):
    result = subprocess.run(
        [sys.executable, "-m", "launchtune.kernels.tridiag", "solve", "--size", size, "--backend", "numpy"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: {match}") and result.stderr.count("\n") == 1, result.stderr


def test_the_cfd_cli_refuses_an_out_under_a_file_before_simulating(tmp_path):
    (tmp_path / "afile").write_text("x")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    cmd = [
        sys.executable,
        "-m",
        "launchtune.kernels.cfd",
        "run",
        "--size",
        "16x8",
        "--steps",
        "10",
        "--backend",
        "numpy",
    ]
    for extra, match in [
        (["--out", str(tmp_path / "afile" / "sub")], "cannot make this folder: Not a directory"),
        (["--out", str(tmp_path / "o"), "--smoothing", str(10**9)], "--smoothing must be from 0 to 10,000"),
    ]:
        result = subprocess.run([*cmd, *extra], capture_output=True, text=True, timeout=120, env=env)
        assert result.returncode == 2 and match in result.stderr and result.stderr.count("\n") == 1, (
            result.stderr
        )


@pytest.mark.parametrize(
    "extra, env, match",
    [
        (["--seed", str(2**32)], {}, "--seed: at most 4,294,967,295"),
        (["--max-minutes", "nan"], {}, "argument --max-minutes: must be a finite number more than 0"),
        (["--max-minutes", "inf"], {}, "argument --max-minutes: must be a finite number"),
        (["--workers-per-class", "0"], {}, "argument --workers-per-class: must be from 1 to"),
        (
            [],
            {"LAUNCHTUNE_WAIT_S": "1e300"},
            "$LAUNCHTUNE_WAIT_S: must be a number of seconds > 0 and at most",
        ),
        (
            [],
            {"LAUNCHTUNE_GONE_S": "0"},
            "$LAUNCHTUNE_GONE_S: must be a number of seconds > 0 and at most",
        ),
    ],
)
def test_a_flag_or_environment_value_past_its_limit_is_refused_before_any_folder(
    tmp_path, write_spec, extra, env, match
):
    spec = write_spec()
    out = tmp_path / "out"
    line = one_line_error(run_cli_here("sweep", str(spec), "--out", str(out), *extra, cwd=tmp_path, env=env))
    assert match in line
    assert not out.exists()


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--seed", str(2**32)], "argument --seed: must be from 0 to 4,294,967,295"),
        (["--repeats", "0"], "argument --repeats: must be from 1 to"),
        (["--seeds", str(10**11)], "argument --seeds: must be from 1 to"),
        (["--budget", "0"], "argument --budget: must be from 1 to"),
        (["--compare", "--workers", "0"], "argument --workers: must be from 1 to"),
        (["--compare", "--budgets", "5,x"], "argument --budgets: must be a whole number"),
    ],
)
def test_the_strategies_flags_are_checked_where_they_are_read(tmp_path, extra, match):
    cache = write_cache(tmp_path / "A100.json.gz", "NVIDIA A100-PCIE-40GB")
    line = one_line_error(run_cli_here("strategies", "--dataset", str(cache), *extra, cwd=tmp_path))
    assert match in line


def test_the_largest_seed_runs_a_whole_sweep(tmp_path, write_spec):
    """scikit-learn's random_state stops at 2**32 - 1; the sweep's derived seeds (the re-measure's) wrap."""
    spec = write_spec(seed=SEED_MAX, samples=20)
    out = tmp_path / "out"
    result = run_cli("sweep", str(spec), "--out", str(out), cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "report.json").is_file()


def test_a_local_class_without_workers_ends_the_sweep_with_one_line_naming_them():
    """Dask's Nanny does not restart a worker killed while it restarts: the measuring loop looks between its
    waits, and a class whose workers have all been gone for ``GONE_S`` ends the sweep (the clock is the
    loop's: here the class has been gone since long before)."""

    class NoWorkers:
        def scheduler_info(self):
            return {"workers": {}}

    expected = {"cpu": {"cpu-0", "cpu-1"}}
    gone_since: dict[str, float] = {}
    _check_workers(NoWorkers(), expected, {"cpu": 1}, gone_since)  # just gone: wait for a restart
    assert set(gone_since) == {"cpu"}
    _check_workers(NoWorkers(), expected, {"cpu": 0}, gone_since)  # nothing in flight: nothing to wait for
    assert gone_since == {}
    gone_since["cpu"] = time.perf_counter() - GONE_S
    with pytest.raises(ClusterFailure, match=r"worker cpu-0, cpu-1 of class cpu died and was not restarted"):
        _check_workers(NoWorkers(), expected, {"cpu": 1}, gone_since)


def test_a_batch_that_kills_its_worker_every_time_ends_the_sweep_with_one_line(tmp_path, write_spec):
    """Each run of the batch kills its worker; the Nanny restarts it and Dask retries the batch a bounded
    number of times (``allowed-failures``), then the sweep ends with one line, exit 1, not a traceback. (Dask
    workers: with one device the sweep measures in its own process, which such a batch ends; see
    docs/faults.md.)"""
    spec = write_spec(samples=10, options={"die": True})
    out = tmp_path / "out"
    result = run_cli(
        "sweep", str(spec), "--out", str(out), "--workers-per-class", "2", cwd=tmp_path,
        env={"PYTHONWARNINGS": "ignore"}, timeout=600,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    lines = [x for x in result.stderr.splitlines() if x.strip() and not x.startswith("measure")]
    assert lines[-1].startswith("error: measure: 1 batch task(s) failed on the cluster; first: "), (
        result.stderr
    )
    assert "KilledWorker" in lines[-1] and len(lines) == 1, result.stderr[-3000:]


@pytest.mark.parametrize(
    "options, match",
    [
        ({"dataset": "nosuch.parquet"}, "spec.yaml: options.dataset: nosuch.parquet: no such file or folder"),
        ({}, "spec.yaml: options.dataset: a recorded dataset's path is required"),
        ({"dataset": "{cache}", "time_scale": -1}, "spec.yaml: options.time_scale: must be a number from 0"),
        (
            {"dataset": "{cache}", "fail_fraction": 2},
            "spec.yaml: options.fail_fraction: must be a number from 0 to 1",
        ),
        ({"dataset": "{cache}", "seed": "3"}, "spec.yaml: options.seed: must be an integer"),
        # the fault hook that writes a marker file is no spec option ($LAUNCHTUNE_REHEARSAL_KILL, tests only)
        ({"dataset": "{cache}", "kill_dir": "/tmp"}, "spec.yaml: options.kill_dir: unknown replay option"),
        ({"dataset": "{cache}", "kill_workers": ["cpu-0"]}, "options.kill_workers: unknown replay option"),
        ({"dataset": "{cache}", "colour": 1}, "spec.yaml: options.colour: unknown replay option 'colour'"),
    ],
)
def test_replay_options_are_checked_with_the_spec(tmp_path, options, match):
    cache = write_cache(tmp_path / "A100.json.gz", "NVIDIA A100-PCIE-40GB")
    options = {k: str(cache) if v == "{cache}" else v for k, v in options.items()}
    with pytest.raises(UserError, match=re.escape(match)):
        parse_spec(base_spec(workload="replay", case="replay", size="1", options=options), "spec.yaml")


class _Failed:
    """A Dask future whose task raised on its worker."""

    def __init__(self, exc: BaseException):
        self.exc = exc

    def result(self, timeout=None):
        raise self.exc


@pytest.mark.parametrize(
    "exc, kind, code",
    [
        (MemoryError("Unable to allocate 59.6 GiB for an array"), UserError, 2),  # a size over the memory
        (WorkloadError("unknown option 'x'", "options.x"), UserError, 2),
        (RuntimeError("Attempted to run task on 4 different workers\nsecond line"), ClusterFailure, 1),
    ],
)
def test_a_task_that_failed_on_its_worker_is_one_line_naming_what(exc, kind, code):
    """A plan or re-measurement that fails on its worker (a tridiagonal size over the worker's memory was
    the worker's traceback, after the cluster started) is one line naming what and why."""
    with pytest.raises(kind) as info:
        result(_Failed(exc), "the plan of class cpu", 10.0)
    message = str(info.value)
    assert message.startswith(f"the plan of class cpu failed on the cluster: {type(exc).__name__}: ")
    assert "\n" not in message and info.value.exit_code == code


@pytest.mark.parametrize(
    "out, env, spec_overrides, match",
    [
        ("{tmp}/afile/sub", {}, {}, "afile/sub: cannot make this folder: Not a directory"),
        ("/proc/launchtune-test", {}, {}, "/proc/launchtune-test: cannot make this folder"),
        ("{tmp}/" + "a" * 300, {}, {}, "cannot make this folder: File name too long"),
        (
            None,
            {"LAUNCHTUNE_RESULTS": "{tmp}/afile"},
            {},
            "$LAUNCHTUNE_RESULTS: {tmp}/afile exists and is not a folder",
        ),
        (None, {}, {"output": "."}, "spec.yaml: output: '.' is the results folder itself"),
        (None, {}, {"output": "a\x00b"}, "spec.yaml: output: 'a\\x00b' is not a usable path"),
        (None, {}, {"size": "²x64"}, "spec.yaml: size: must be a positive size"),
        (None, {}, {"size": "２０８x64"}, "spec.yaml: size: must be a positive size"),
        (None, {}, {"options": {1: 2}}, "spec.yaml: options: 1: keys must be names"),
        (None, {}, {"options": []}, "spec.yaml: options: must be a mapping of workload options (got [])"),
        (None, {}, {"validate": 0}, "spec.yaml: validate: must be a mapping"),
        (None, {}, {"train": False}, "spec.yaml: train: must be a mapping"),
    ],
)
def test_paths_and_values_of_the_wrong_kind_are_one_line_before_anything_is_made(
    tmp_path, out, env, spec_overrides, match
):
    (tmp_path / "afile").write_text("x")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(base_spec(**spec_overrides), allow_unicode=True))
    env = {k: v.replace("{tmp}", str(tmp_path)) for k, v in env.items()}
    args = ["--out", out.replace("{tmp}", str(tmp_path))] if out else []
    line = one_line_error(run_cli_here("sweep", str(spec), *args, cwd=tmp_path, env=env))
    assert match.replace("{tmp}", str(tmp_path)) in line
    assert (tmp_path / "afile").read_text() == "x" and not (tmp_path / "results").exists()
