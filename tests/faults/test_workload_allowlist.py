"""A spec's ``module:factory`` workload runs only where the user allowed it (issue 14: ``workload: os:system``
imported ``os`` on the workers): an installed ``launchtune.workloads`` entry point or ``--allow-workload``."""

from __future__ import annotations

import os
from importlib.metadata import EntryPoint
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store import workloads
from launchtune.pipeline.store.workloads import ENTRY_POINT_GROUP, check_allow_flag, check_workload, resolve
from tests.pipeline.conftest import FAKE, REPO, one_line_error, run_cli, run_cli_here


@pytest.mark.parametrize(
    "workload, extra, match",
    [
        # the fake workload is allowed on this command line (run_cli), os:system is not
        ("os:system", [], "spec.yaml: workload: 'os:system' is code the workers would import and run"),
        (
            "nosuch",
            [],
            "spec.yaml: workload: unknown workload 'nosuch' (registered: cfd, kernel, replay, tridiag",
        ),
        (FAKE, ["--allow-workload", "os.system"], "--allow-workload: expected module:factory"),
    ],
)
def test_a_workload_nobody_allowed_is_one_line_before_anything_is_made(
    tmp_path, write_spec, workload, extra, match
):
    out = tmp_path / "out"
    spec = write_spec(workload=workload)
    line = one_line_error(run_cli_here("sweep", str(spec), "--out", str(out), *extra, cwd=tmp_path))
    assert match in line
    assert str(spec) in line or "--allow-workload" in line
    assert not out.exists() and not (tmp_path / "results").exists()  # no folder, so no cluster either


def test_without_the_flag_the_fake_workload_is_refused_and_the_flag_names_what_to_pass(tmp_path, write_spec):
    out = tmp_path / "out"
    result = run_cli_here("sweep", str(write_spec()), "--out", str(out), cwd=tmp_path, allow_fake=False)
    assert f"--allow-workload {FAKE}" in one_line_error(result)
    assert not out.exists()


def _entry_points(*pairs: tuple[str, str]):
    eps = [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in pairs]
    return lambda group: [ep for ep in eps if ep.group == group]


def test_the_flag_allows_exactly_its_module_factory():
    check_workload("cfd", [], "s.yaml: workload")  # registered names need nothing
    check_workload("replay", [], "s.yaml: workload")
    check_workload("mypkg.wl:make", [check_allow_flag("mypkg.wl:make")], "s.yaml: workload")
    with pytest.raises(UserError, match="s.yaml: workload: 'mypkg.wl:other' is code"):
        check_workload("mypkg.wl:other", ["mypkg.wl:make"], "s.yaml: workload")
    for bad in ("mypkg.wl", "mypkg wl:make", ":make", "mypkg.wl:", "a:b:c", "1pkg:make"):
        with pytest.raises(UserError, match="--allow-workload: expected module:factory"):
            check_allow_flag(bad)


def test_an_installed_entry_point_allows_its_target_and_its_name(monkeypatch):
    monkeypatch.setattr(workloads, "entry_points", _entry_points(("mine", "mypkg.wl:make [extra]")))
    check_workload("mypkg.wl:make", [], "s.yaml: workload")
    check_workload("mine", [], "s.yaml: workload")
    assert resolve("mine") == "mypkg.wl:make" and resolve("cfd") == "cfd"
    assert resolve("replay") == "replay"  # registered: built by the registry itself
    with pytest.raises(UserError, match="'mypkg.wl:other' is code"):  # same module, another factory
        check_workload("mypkg.wl:other", [], "s.yaml: workload")
    monkeypatch.setattr(workloads, "entry_points", _entry_points())
    with pytest.raises(UserError, match="unknown workload 'mine'"):
        check_workload("mine", [], "s.yaml: workload")


def _install_entry_point(site: Path, name: str, target: str) -> None:
    """What pip leaves for a package declaring the entry point: a .dist-info folder on the path."""
    info = site / "launchtune_testwl-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: launchtune-testwl\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {target}\n")


def test_an_entry_point_workload_runs_a_sweep_by_its_name_without_a_flag(tmp_path, write_spec):
    site = tmp_path / "site"
    _install_entry_point(site, "testwl", FAKE)
    spec = write_spec(
        workload="testwl", samples=10, batch_size=10, validate={"pool": 20, "top_k": 1, "repeats": 1}
    )
    out = tmp_path / "out"
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}
    result = run_cli("sweep", str(spec), "--out", str(out), cwd=tmp_path, env=env, allow_fake=False)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    rows = pq.read_table(out / "merged").to_pylist()
    assert len(rows) == 10 and {r["workload"] for r in rows} == {"testwl"}
    assert {r["status"] for r in rows} <= {"ok", "invalid", "failed"} and any(
        r["status"] == "ok" for r in rows
    )
