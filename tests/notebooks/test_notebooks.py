"""The four notebooks: stored without outputs, and each runs headless on the committed data/ and draws its
figures (through ``launchtune notebooks``' own function, so a notebook that breaks fails here)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

import nbformat
import pytest

from launchtune.pipeline import results
from launchtune.pipeline.commands.notebooks import (
    NOTEBOOK_DIR,
    NotebookError,
    execute_notebook,
    notebook_paths,
)
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.results import DEFAULT_RESULTS, RESULTS_ENV
from tests.pipeline.conftest import one_line_error, run_cli_here

NAMES = ["01_sweep_overview", "02_surrogates", "03_tridiagonal_streams", "04_runtime_autotuner"]
_STARTED: list[Future] = []  # the executions the ``executions`` fixture started, for the tests that must wait


@pytest.fixture(scope="module")
def executions(tmp_path_factory) -> Iterator[dict[str, tuple[Future, Path]]]:
    """The notebook runs of the tests below that set no environment variable, each in its own kernel as
    before, started together on the machine's cores (a kernel is a process of its own; each test waits on
    its run and checks it as it did): ``(the run, the folder it writes)`` by a name of the test's."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        runs: dict[str, tuple[Future, Path]] = {}

        def start(key: str, fn: Callable, *args: object) -> None:
            out = tmp_path_factory.mktemp(key)
            runs[key] = (pool.submit(fn, *args, out), out)
            _STARTED.append(runs[key][0])

        for name in NAMES:
            start(name, execute_notebook, NOTEBOOK_DIR / f"{name}.ipynb", DEFAULT_RESULTS)
        start("kernel_spec_overview", run_on, "01_sweep_overview", CONVOLUTION / "h100" / "sweep")
        start("seven_gpu_surrogates", run_on, "02_surrogates", CONVOLUTION)
        start("kernel_sweep_surrogates", run_on, "02_surrogates", CONVOLUTION / "h100" / "sweep")
        yield runs


@pytest.fixture(autouse=True)
def _started_runs_end_first(request):
    """A test that changes the environment or runs a notebook of its own waits for the started runs first
    (they read the environment when they start, and the machine's cores are theirs meanwhile)."""
    if "executions" not in request.fixturenames:
        wait(_STARTED)


def test_the_four_notebooks_are_there_and_stored_without_outputs():
    paths = notebook_paths()
    assert [p.stem for p in paths] == NAMES
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        for cell in code:
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: strip the outputs"
        assert RESULTS_ENV in code[0].source and '"data"' in code[0].source, "first cell names the results"
        assert nb.metadata.kernelspec.name == "python3"
        imports = [ln for c in code for ln in c.source.splitlines() if ln.startswith(("import ", "from "))]
        assert not [ln for ln in imports if "pipeline." in ln.split(" import")[0] and "_" in ln], (
            "notebooks use public functions of pipeline and kernels only"
        )


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_on_the_committed_data_and_draws(name, executions):
    run, tmp_path = executions[name]
    nb, seconds = run.result()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3 if name != "01_sweep_overview" else len(images) >= 2, f"{name}: figures missing"
    assert (tmp_path / f"{name}.ipynb").is_file()
    # the same copy as a page a browser opens, its figures inline
    html = (tmp_path / f"{name}.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and html.count("data:image/png;base64,") >= len(images)
    # the stored notebook is untouched: executing writes only the copy
    assert all(not c.get("outputs") for c in nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", 4).cells)


@pytest.mark.slow
def test_sweep_overview_draws_the_fused_space(tmp_path, monkeypatch):
    """Notebook 01 on the fused-kernel sweeps (issue 16): one launch space at a time, each class once."""
    monkeypatch.setenv("LAUNCHTUNE_NOTEBOOK_SPACE", "fused")
    nb, _ = execute_notebook(NOTEBOOK_DIR / "01_sweep_overview.ipynb", DEFAULT_RESULTS, tmp_path)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    assert "launch space 'fused'" in text and "cfd/h100/sweep_fused" in text and "classes: h100, h200" in text


@pytest.mark.slow
def test_sweep_overview_draws_the_tridiagonal_sweep(tmp_path, monkeypatch):
    """Notebook 01 on the tridiagonal sweep (issue 21): its space has no per-kernel launch grid to draw, which
    the notebook says instead of failing."""
    monkeypatch.setenv("LAUNCHTUNE_NOTEBOOK_SPACE", "default")
    nb, _ = execute_notebook(NOTEBOOK_DIR / "01_sweep_overview.ipynb", DEFAULT_RESULTS, tmp_path)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    assert "tridiag/h100/sweep_1e7" in text and "no per-kernel (blocks, threads) launch parameters" in text


CONVOLUTION = DEFAULT_RESULTS / "convolution"


def run_on(name: str, folder, out) -> tuple[str, dict[str, list]]:
    """Execute a notebook on ``folder``; its text output (printed and displayed) and each code cell's outputs
    by the cell's source.
    The stored notebook and the results folder are left as they were: the run writes only ``out``."""
    stored = (NOTEBOOK_DIR / f"{name}.ipynb").read_bytes()
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
    nb, _ = execute_notebook(NOTEBOOK_DIR / f"{name}.ipynb", folder, out)
    assert (NOTEBOOK_DIR / f"{name}.ipynb").read_bytes() == stored
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == before, "nothing written into data/"
    outputs = {c.source: c.outputs for c in nb.cells if c.cell_type == "code"}
    flat = [o for cell in outputs.values() for o in cell]
    assert not [o for o in flat if o.output_type == "error"]
    return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in flat), outputs


def images(outputs: dict[str, list]) -> int:
    return sum("image/png" in o.get("data", {}) for cell in outputs.values() for o in cell)


@pytest.mark.slow
def test_sweep_overview_on_a_kernel_spec_sweep(executions):
    """Notebook 01 on the H100 sweep of the shipped convolution spec (the `kernel` workload): its launch space
    is `kernel/convolution`, its heat map spans the thread block and its tables name the spec's parameters."""
    text, outputs = executions["kernel_spec_overview"][0].result()
    assert "launch space 'kernel/convolution': sweep; classes: h100" in text
    assert "4362" in text and "no per-kernel" not in text  # every configuration counted, a grid drawn
    heat = {src: out for src, out in outputs.items() if "kernel_heatmaps" in src}  # and the fastest cell
    best = "".join(o.get("data", {}).get("text/plain", "") for cell in heat.values() for o in cell)
    assert images(heat) == 1 and "convolution_kernel" in best and "block_size_x  block_size_y" in best
    assert all(p in text for p in ("tile_size_x", "use_shmem", "read_only"))  # the best configurations


@pytest.mark.slow
def test_surrogates_on_a_kernel_sweep_and_its_seven_gpu_combination(executions):
    """Notebook 02 on data/convolution: the seven-GPU combined folder (its models' scores only: its rows, six
    GPUs' of them the Benchmark Hub's, are not committed) is shown in place of the H100's own folder, with
    leave one GPU out, whether each pick is within 10%, and each GPU against every other."""
    text, outputs = executions["seven_gpu_surrogates"][0].result()
    gpus = "a100, a4000, a6000, h100, mi250x, w6600, w7800"
    assert f"models of: combined ({gpus}), hub/combined (" in text and "h100/sweep" not in text
    assert "combined: no merged/ here, so no rows to predict\nhub/combined: no merged/ here" in text
    assert "within_10pct" in text and "why_not" in text
    assert "combined: other_best_here_over_best" in text and "mi250x" in text.split("spearman")[-1]
    assert images(outputs) >= 2 * 4  # R2, loss, comparison and leave-one-out of each combined folder


@pytest.mark.slow
def test_surrogates_predict_a_kernel_sweep(executions):
    """Notebook 02 on the H100 convolution sweep alone: its models predict its rows with the recorded R2."""
    text, outputs = executions["kernel_sweep_surrogates"][0].result()
    assert "models of: sweep (h100)" in text
    recorded = results.r2_table(results.load_sweep(CONVOLUTION / "h100" / "sweep").metrics)
    r2 = recorded.set_index(["group", "model"]).loc[("h100", "mlp"), "r2_test"]
    assert f"sweep h100 mlp: R2 test {r2:.4f} (recorded {r2:.4f})" in text
    assert "sweep: no class-against-class results" in text  # one class: nothing to pair
    assert images(outputs) >= 4


def test_a_failing_cell_is_named_with_its_notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("import os\nprint(os.environ['LAUNCHTUNE_NOTEBOOK_RESULTS'])"),
        nbformat.v4.new_markdown_cell("text"),
        nbformat.v4.new_code_cell("x = 1\nraise ValueError('broken on purpose')"),
        nbformat.v4.new_code_cell("print('never')"),
    ]
    path = tmp_path / "09_broken.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(
        NotebookError, match=r"09_broken.ipynb: cell 2 \(`x = 1`\) .*ValueError: broken on purpose"
    ):
        execute_notebook(path, tmp_path, tmp_path / "out")
    copy = nbformat.read(tmp_path / "out" / "09_broken.ipynb", 4)
    assert copy.cells[0].outputs[0].text.strip() == str(tmp_path.resolve())  # the folder reached the kernel
    assert copy.cells[2].outputs[-1].output_type == "error" and not copy.cells[3].outputs
    html = (tmp_path / "out" / "09_broken.html").read_text()  # the partly executed copy as a page too
    assert "broken on purpose" in html and "never'" in html  # the error, and the cell never run


def test_notebook_selection_by_number_or_name():
    assert [p.stem for p in notebook_paths(["03", "01_sweep_overview"])] == [NAMES[2], NAMES[0]]
    with pytest.raises(UserError, match="notebook '07': not in"):
        notebook_paths(["07"])


def test_cli_help_and_user_errors(tmp_path):
    r = run_cli_here("notebooks", "--help")
    assert r.returncode == 0 and "--results" in r.stdout and "make notebooks" in r.stdout
    assert "notebook '07': not in" in one_line_error(run_cli_here("notebooks", "07"))
    missing = run_cli_here(
        "notebooks", "01", "--results", str(tmp_path / "missing"), "--out", str(tmp_path / "o")
    )
    assert "missing: no such results folder" in one_line_error(missing)
    # a notebook that breaks on the data it meets: named, exit 1, the others still run
    (tmp_path / "empty").mkdir()
    r = run_cli_here("notebooks", "04", "--results", str(tmp_path / "empty"), "--out", str(tmp_path / "o"))
    assert r.returncode == 1, r.stderr[-2000:]
    assert "error: 04_runtime_autotuner.ipynb: cell 2 (`import matplotlib.pyplot as plt`)" in r.stdout
    assert "1 of 1 notebooks failed: 04_runtime_autotuner.ipynb" in r.stderr
