"""A kernel sweep's mistakes through the real CLI: one line naming the file and field, exit 2, no folder and
no cluster; the C header export of a kernel sweep's tuning table, read back by the C preprocessor."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.spec import load_spec, parse_spec
from launchtune.pipeline.store.workloads import check_workload, workload_code
from tests.pipeline.conftest import one_line_error, run_cli_here


def _sweep(tmp_path, kernel_spec: str = "kernel.yaml", **overrides) -> str:
    spec = {
        "name": "mine",
        "workload": "kernel",
        "case": "scale",
        "size": "1000",
        "options": {"spec": kernel_spec},
        "samplers": ["exhaustive"],
        "samples": 0,
        **overrides,
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


@pytest.mark.parametrize(
    ("changes", "field", "why"),
    [
        ({"source": "missing.cu"}, "source", "no such file"),
        ({"kernel_name": "scale2"}, "kernel_name", "no '__global__ ... scale2('"),
        ({"restrictions": ["block_size_x * tiles <= 256"]}, "restrictions[0]", "unknown name 'tiles'"),
        ({"restrictions": ["__import__('os').system('x')"]}, "restrictions[0]", "is not allowed"),
        ({"grid_div_x": 0}, "grid_div_x", "must be a positive number"),
        (
            {"arguments": [{"name": "o", "dtype": "float32", "shape": ["tile * 4"]}]},
            "arguments[0].shape[0]",
            "unknown name 'tile'",
        ),
        (
            {"arguments": [{"name": "o", "dtype": "float64", "shape": ["problem_size_x * 10**8"]}]},
            "arguments",
            "more than any GPU class of the registry",
        ),
    ],
)
def test_bad_kernel_spec_is_one_line_naming_both_files(tmp_path, write_spec, changes, field, why):
    """What the sweep command reads first (``load_spec``), in process; the real CLI below for two cases."""
    kernel = write_spec(**changes)
    sweep = _sweep(tmp_path)
    with pytest.raises(UserError) as info:
        load_spec(sweep)
    line = str(info.value)
    assert line.startswith(f"{sweep}: options.spec: {kernel}: {field}")
    assert why in line and "\n" not in line


def test_through_the_real_cli_nothing_is_made(tmp_path, write_spec):
    out = tmp_path / "out"
    kernel = write_spec(kernel_name="scale2")
    line = one_line_error(run_cli_here("sweep", _sweep(tmp_path), "--out", str(out), cwd=tmp_path))
    where = f"{tmp_path / 'sweep.yaml'}: options.spec: {kernel}: kernel_name"
    assert line == f"error: {where}: no '__global__ ... scale2(' in scale.cu"
    write_spec()  # valid, but this machine has no GPU: refused before any cluster starts
    line = one_line_error(run_cli_here("sweep", _sweep(tmp_path), "--out", str(out), cwd=tmp_path))
    assert "workload: kernel compiles and runs CUDA and no GPU is visible on this machine" in line
    assert not out.exists() and not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        ({"options": {"spec": "nope.yaml"}}, "options.spec: {tmp}/nope.yaml: no such kernel spec"),
        ({"backend": "numpy"}, "backend: the kernel workload runs CUDA only"),
        ({"options": {"spec": "kernel.yaml", "speed": 9}}, "options: unknown option 'speed'"),
    ],
)
def test_sweep_level_mistakes(tmp_path, write_spec, overrides, why):
    write_spec()
    with pytest.raises(UserError, match=re.escape(why.format(tmp=tmp_path))):
        load_spec(_sweep(tmp_path, **overrides))


def test_python_a_kernel_spec_names_needs_allowing(tmp_path, write_spec):
    kernel = write_spec(reference="mypkg.check:answer")
    spec = load_spec(_sweep(tmp_path))
    refs = workload_code(spec)
    assert refs == [(f"{kernel}: reference", "mypkg.check:answer")]
    with pytest.raises(
        UserError, match=f"{kernel}: reference: 'mypkg.check:answer' is code the workers would"
    ):
        check_workload(refs[0][1], [], refs[0][0])
    check_workload(refs[0][1], ["mypkg.check:answer"], refs[0][0])  # --allow-workload mypkg.check:answer


def test_the_kernel_spec_path_is_relative_to_the_sweep_spec(tmp_path, write_spec):
    write_spec()
    (tmp_path / "sweeps").mkdir()
    spec = parse_spec(
        yaml.safe_load(open(_sweep(tmp_path, "../kernel.yaml"))), str(tmp_path / "sweeps" / "s.yaml")
    )
    assert spec.options["spec"] == str(tmp_path / "kernel.yaml")


def _kernel_sweep_folder(tmp_path, kernel) -> str:
    """What a kernel sweep leaves for the export: sweep.json and tuning_table.json."""
    folder = tmp_path / "sweep"
    folder.mkdir()
    spec = parse_spec(yaml.safe_load(open(_sweep(tmp_path))), str(tmp_path / "sweep.yaml"))
    (folder / "sweep.json").write_text(json.dumps({"spec": spec.to_dict(), "plan": {}}))
    entry = {
        "workload": "kernel",
        "case": "scale",
        "size": "1000",
        "default": {"block_size_x": 32, "tile": 1},
    }
    table = {
        "format": "launchtune.tuning_table/1",
        "version": 1,
        "entries": [
            {**entry, "gpu_class": "h100", "best": {"block_size_x": 64, "tile": 2}, "best_ms": 0.0101},
            {**entry, "gpu_class": "a4000", "best": {"block_size_x": 128, "tile": 1}, "best_ms": 0.02},
        ],
    }
    (folder / "tuning_table.json").write_text(json.dumps(table))
    return str(folder)


def _preprocess(header, *flags) -> dict[str, str]:
    """The macros the C preprocessor sees after including ``header`` with ``flags``."""
    result = subprocess.run(["cpp", "-dM", *flags, str(header)], capture_output=True, text=True, check=True)
    pairs = (line.split(" ", 2)[1:] for line in result.stdout.splitlines() if line.startswith("#define "))
    return {p[0]: p[1] for p in pairs if len(p) == 2}


@pytest.mark.skipif(shutil.which("cpp") is None, reason="no C preprocessor (cpp) on this machine")
def test_c_header_export_gives_each_class_its_pick(tmp_path, write_spec):
    folder = _kernel_sweep_folder(tmp_path, write_spec())
    header = tmp_path / "scale_tuned.h"
    result = run_cli_here("export", "--format", "c-header", folder, str(header), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"exported": str(header), "gpu_classes": ["h100", "a4000"]}
    h100 = _preprocess(header, "-DTARGET_H100")
    assert {k: h100[k] for k in ("block_size_x", "tile", "grid_size_x", "block_size_y")} == {
        "block_size_x": "64", "tile": "2", "grid_size_x": "8", "block_size_y": "1",
    }  # fmt: skip
    a4000 = _preprocess(header, "-DTARGET_A4000")
    assert (a4000["block_size_x"], a4000["tile"], a4000["grid_size_x"]) == ("128", "1", "8")
    default = _preprocess(header)
    assert (default["block_size_x"], default["tile"], default["grid_size_x"]) == ("32", "1", "32")
    tuning = _preprocess(header, "-Dkernel_tuner=1", "-DTARGET_H100")  # while tuning, the header is silent
    assert "tile" not in tuning
    assert "0.0101 ms" in header.read_text()


def test_c_header_export_mistakes(tmp_path, write_spec):
    folder = _kernel_sweep_folder(tmp_path, write_spec())
    line = one_line_error(
        run_cli_here("export", "--format", "c-header", folder, str(tmp_path / "x.txt"), cwd=tmp_path)
    )
    assert "x.txt: a C header's name ends in .h" in line
    (tmp_path / "kernel.yaml").unlink()
    line = one_line_error(
        run_cli_here("export", "--format", "c-header", folder, str(tmp_path / "x.h"), cwd=tmp_path)
    )
    assert "the sweep's kernel spec" in line and "no such kernel spec" in line
    assert not (tmp_path / "x.h").exists()


def _table_with(folder: str, **best_changes) -> None:
    """The folder's tuning table with its h100 entry's fields replaced."""
    path = Path(folder) / "tuning_table.json"
    table = json.loads(path.read_text())
    table["entries"][0].update(best_changes)
    path.write_text(json.dumps(table))


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"gpu_class": 'h100 */\n#include "/etc/passwd"\n/*'}, "entries[0].gpu_class: "),
        ({"gpu_class": "a-4000"}, None),  # a plain name: written
        ({"gpu_class": "A4000"}, "entries[1].gpu_class: 'a4000' and 'A4000' both become TARGET_A4000"),
        ({"best": {"block_size_x": 10**30, "tile": 1}}, "best.block_size_x: 1e+30 does not fit a C int"),
        ({"best": {"block_size_x": 64, "tile": 2**31}}, "best.tile: 2.15e+09 does not fit a C int"),
        ({"best": None}, "entries[0].best: expected a configuration"),
        ({"best": {"block_size_x": 64}}, "entries[0].best: no value for the parameter 'tile'"),
        ({"best": {"block_size_x": 0, "tile": 1}}, "entries[0].best: thread block (0, 1, 1)"),
        ({"best": {"block_size_x": 64, "tile": 0}}, "grid_div_x: divisor 0 for this configuration"),
    ],
)
def test_c_header_export_refuses_what_is_not_a_name_or_an_int(tmp_path, write_spec, changes, why):
    """A tuning table is data that may come from someone else: nothing of it is pasted into C unchecked."""
    from launchtune.pipeline.commands.export import write_c_header

    folder = _kernel_sweep_folder(tmp_path, write_spec())
    _table_with(folder, **changes)
    header = tmp_path / "x.h"
    if why is None:
        assert write_c_header(Path(folder), header) == 0
        assert "defined(TARGET_A_4000)  /* a-4000 (0.0101 ms) */" in header.read_text()
        return
    with pytest.raises(UserError) as info:
        write_c_header(Path(folder), header)
    line = str(info.value)
    assert line.startswith(f"{folder}/tuning_table.json: ") and why in line and "\n" not in line
    assert not header.exists()


def test_c_header_comments_hold_no_comment_end(tmp_path, write_spec):
    """The sweep folder's name and the source's file name go into a comment: escaped, one line each."""
    from launchtune.kernels.kernel.header import comment
    from launchtune.pipeline.commands.export import write_c_header

    assert comment("a */ b\n#include <x> /* c") == "a *? b?#include <x> ?* c"
    for text in ("**//**/", "/*/", "*/*/", "a\\\nb"):
        assert "*/" not in comment(text) and "/*" not in comment(text) and "\n" not in comment(text)
    folder = _kernel_sweep_folder(tmp_path, write_spec())
    hostile = tmp_path / "s *" / "\n#include <stdio.h>\n"  # ".../s */\n#include ..."
    hostile.parent.mkdir()
    Path(folder).rename(hostile)
    header = tmp_path / "x.h"
    assert write_c_header(hostile, header) == 0
    text = header.read_text()
    assert "\n#include" not in text and "s *??#include <stdio.h>?." in text
    assert text.count("*/") == text.count("/*")
