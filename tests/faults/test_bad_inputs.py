"""Bad inputs that were once tracebacks after the cluster had started: each is one line naming the file
and field, exit 2, before any sweep folder or cluster is made."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml

from launchtune.kernels.yamlfile import MAX_DEPTH
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.spec import load_spec, parse_spec
from launchtune.pipeline.yamlio import MAX_BYTES, load_yaml
from tests.pipeline.conftest import REPO, base_spec, one_line_error, run_cli, run_cli_here

CFD = {"workload": "cfd", "case": "inlet", "size": "208x64", "options": {"space": "paper"}}


@pytest.mark.parametrize(
    "overrides, match",
    [
        (
            {"workload": "nosuch"},
            "spec.yaml: workload: unknown workload 'nosuch' (registered: cfd, kernel, replay, tridiag",
        ),
        ({**CFD, "case": "nosuch"}, "spec.yaml: case: unknown cfd case 'nosuch'"),
        (
            {**CFD, "options": {"space": "paper", "bogus": 1}},
            "spec.yaml: options.bogus: unknown cfd workload option",
        ),
        ({**CFD, "options": {"space": "nosuch"}}, "spec.yaml: options.space: unknown space preset 'nosuch'"),
        ({**CFD, "size": "104"}, "spec.yaml: size: size '104' is not NXxNY"),
        ({**CFD, "size": "104x32x4"}, "spec.yaml: size: size '104x32x4' is not NXxNY"),
        ({"workload": "tridiag", "case": "random", "size": "104x32"}, "spec.yaml: size: size '104x32'"),
        (
            {"workload": "tridiag", "case": "random", "size": "1000", "options": {"colour": 1}},
            "options.colour",
        ),
    ],
)
def test_a_registered_workloads_arguments_are_checked_with_the_spec(overrides, match):
    with pytest.raises(UserError, match=re.escape(match)):
        parse_spec(base_spec(**overrides), "spec.yaml")


def test_good_arguments_of_each_registered_workload_pass():
    assert parse_spec(base_spec(**CFD), "spec.yaml").case == "inlet"
    assert parse_spec(base_spec(workload="tridiag", case="heat", size="1000"), "spec.yaml").size == "1000"


def _alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A "billion laughs": each anchor a list of ``width`` aliases of the one before (width^levels nodes)."""
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\nname: x\n"


@pytest.mark.parametrize(
    "content, match",
    [
        (b"\x7fELF\x02\x01\x01\x00\xd0\xff", "not a text file"),
        (b"name: x\n\x00\n", "not a text file (it holds NUL bytes)"),
        (_alias_bomb().encode(), "YAML aliases (*l0) are not allowed (line 2)"),
        (b"a: &a [1, *a]\nname: x\n", "YAML aliases (*a) are not allowed (line 1)"),
        (b"name: " + b"[" * 5000 + b"]" * 5000 + b"\n", f"YAML nested deeper than {MAX_DEPTH} levels"),
        (b"name: x\n" + b"#" * MAX_BYTES, f"a YAML config file holds at most {MAX_BYTES:,}"),
    ],
)
def test_a_hostile_or_broken_yaml_file_is_refused_in_one_line_with_bounded_work(
    tmp_path, monkeypatch, content, match
):
    """Refused before any YAML node or Python object is built (the loader reads the parser's events first):
    the alias bomb at its first alias, the 5,000-deep file at its 33rd level, and the binary and oversized
    files never reach the parser. Work, not wall-clock time, is what is bounded here."""
    work = {"composed": 0, "constructed": 0}

    def counting(method, key):
        def wrapped(*args, **kwargs):
            work[key] += 1
            return method(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(yaml.SafeLoader, "compose_node", counting(yaml.SafeLoader.compose_node, "composed"))
    monkeypatch.setattr(
        yaml.SafeLoader, "construct_document", counting(yaml.SafeLoader.construct_document, "constructed")
    )
    path = tmp_path / "spec.yaml"
    path.write_bytes(content)
    with pytest.raises(UserError, match=re.escape(match)) as info:
        load_yaml(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    assert work == {"composed": 0, "constructed": 0}, work


def test_a_date_yaml_cannot_build_is_one_line_naming_the_file(tmp_path):
    spec = tmp_path / "date.yaml"
    spec.write_text("name: x\nstarted: 2021-02-30\n")  # PyYAML reads it as a date, and raises ValueError
    with pytest.raises(UserError, match=re.escape(f"{spec}: day is out of range for month")):
        load_yaml(spec)


def test_a_spec_that_is_long_digits_a_fifo_a_loop_or_huge_is_one_line(tmp_path):
    """An integer of 5,000 digits (past Python's limit: a ValueError traceback before), a FIFO (the open
    blocked), a symlink loop, and a sparse 4 GB file read under a 1 GB address-space limit (read whole before
    its size was checked): each one line naming the file."""
    digits = tmp_path / "digits.yaml"
    digits.write_text("name: x\nseed: " + "1" * 5000 + "\n")
    where = (
        f"{digits}: malformed YAML (line 2, column 7): an integer of 5,000 characters (at most 4,300 digits)"
    )
    with pytest.raises(UserError, match=re.escape(where)):  # where in the file, not only which file
        load_yaml(digits)
    os.mkfifo(tmp_path / "fifo.yaml")
    with pytest.raises(UserError, match="fifo.yaml: a FIFO where a YAML config file belongs"):
        load_yaml(tmp_path / "fifo.yaml")
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    with pytest.raises(UserError, match="loop.yaml: cannot read this YAML config file"):
        load_yaml(tmp_path / "loop.yaml")
    huge = tmp_path / "huge.yaml"
    with open(huge, "wb") as f:
        f.truncate(4 << 30)
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from launchtune.pipeline.yamlio import load_yaml\n"
        f"load_yaml({str(huge)!r})"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert f"UserError: {huge}: 4,294,967,296 bytes; a YAML config file holds at most" in done.stderr
    assert "MemoryError" not in done.stderr


def test_a_spec_or_config_with_an_anchor_or_alias_is_refused_in_one_line(tmp_path):
    """No aliases in any YAML the project reads (``kernels.yamlfile``): not even a small one, nor a merge."""
    path = tmp_path / "spec.yaml"
    spec = yaml.safe_dump(base_spec())
    path.write_text("defaults: &train {hidden_layers: [8], max_epochs: 20}\n" + spec)
    assert load_yaml(path)["defaults"] == {"hidden_layers": [8], "max_epochs": 20}  # an anchor alone is text
    path.write_text(spec.replace("train:", "train: &t").replace("validate:", "x-unused: *t\nvalidate:", 1))
    with pytest.raises(
        UserError, match=re.escape(f"{path}: YAML aliases (*t) are not allowed (line")
    ) as info:
        load_spec(path)
    assert "\n" not in str(info.value)
    path.write_text("base: &b {x: 1}\nmerged: {<<: *b, y: 2}\n")
    with pytest.raises(UserError, match=re.escape(f"{path}: YAML aliases (*b) are not allowed (line 2)")):
        load_yaml(path)


@pytest.mark.parametrize(
    "content, env, match",
    [
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1\x00\x00", {}, "spec.yaml: not a text file"),
        (_alias_bomb().encode(), {}, "spec.yaml: YAML aliases (*l0) are not allowed"),
        (
            yaml.safe_dump(base_spec(**{**CFD, "case": "nosuch"})).encode(),
            {},
            "spec.yaml: case: unknown cfd case",
        ),
        (yaml.safe_dump(base_spec(**{**CFD, "size": "104x32x4"})).encode(), {}, "spec.yaml: size:"),
        (
            yaml.safe_dump(base_spec(**{**CFD, "size": "3328x1024", "backend": "cupy"})).encode(),
            {"CUDA_VISIBLE_DEVICES": ""},  # a machine without a GPU, even in a run on one
            "spec.yaml: backend: cupy needs a GPU and none is visible on this machine; run it where one is "
            "(a GPU node, or --cluster slurm), or on the CPU with backend: numpy",
        ),
        (
            yaml.safe_dump(base_spec()).encode(),
            {"LAUNCHTUNE_WAIT_S": "soon"},
            "$LAUNCHTUNE_WAIT_S: must be a",
        ),
        (
            yaml.safe_dump(base_spec()).encode(),
            {"LAUNCHTUNE_GONE_S": "soon"},
            "$LAUNCHTUNE_GONE_S: must be a",
        ),
    ],
)
def test_the_cli_refuses_before_any_folder_or_cluster(tmp_path, content, env, match):
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(content)
    out = tmp_path / "out"
    # in this process, but where the test hides the GPU: CUDA is found once a process, so a fresh one
    if "CUDA_VISIBLE_DEVICES" in env:
        result = run_cli("sweep", str(spec), "--out", str(out), cwd=tmp_path, env=env, timeout=60)
    else:
        result = run_cli_here("sweep", str(spec), "--out", str(out), cwd=tmp_path, env=env)
    assert match in one_line_error(result)
    assert not out.exists() and not (tmp_path / "results").exists()
    assert "dashboard" not in result.stdout  # no cluster was started


def test_an_empty_strategy_and_a_slurm_class_it_does_not_serve_are_one_line_with_nothing_made(
    tmp_path, write_spec
):
    spec = write_spec(gpu_classes=["cpu"])
    out = tmp_path / "out"
    line = one_line_error(
        run_cli_here("sweep", str(spec), "--strategy", "", "--budget", "5", "--out", str(out))
    )
    assert line.startswith("error: --strategy: unknown strategy ''")  # an AssertionError before
    line = one_line_error(run_cli_here("sweep", str(spec), "--cluster", "slurm", "--out", str(out)))
    # the class came from the spec: the line names the spec's field, not a flag the user never gave
    assert (
        line.startswith(f"error: {spec}: gpu_classes: GPU class 'cpu' has no entry in ")
        and "slurm.yaml" in line
    )
    assert "--gpu-class" not in line
    assert not out.exists()  # the SLURM config is checked before --out is made
    line = one_line_error(
        run_cli_here("sweep", str(spec), "--cluster", "slurm", "--gpu-class", "cpu", "--out", str(out))
    )
    assert line.startswith("error: --gpu-class: GPU class 'cpu' has no entry in ") and not out.exists()


@pytest.mark.parametrize("size", ["9" * 5000 + "x4", "9" * 5000, "8x" + "1" * 19])
def test_a_size_of_thousands_of_digits_is_one_line(size):
    """int() of more than 4,300 digits is a ValueError; a size is checked for its digits first."""
    for workload, case in (("cfd", "inlet"), ("tridiag", "random")):
        spec = base_spec(workload=workload, case=case, size=size)
        with pytest.raises(UserError, match="spec.yaml: size: must be a positive size") as info:
            parse_spec(spec, "spec.yaml")
        assert len(str(info.value)) <= 300
