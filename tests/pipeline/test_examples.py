"""The shipped sweep specs and example kernels by name, from a folder outside the repository: ``launchtune
examples`` lists them, ``launchtune examples NAME DIR`` copies one (nothing of the user's replaced), and a
spec's name is a spec (``launchtune sweep default``); a name that is neither is one line. The same from an
installed wheel: tests/packaging/test_wheel.py."""

from __future__ import annotations

from pathlib import Path

import yaml

from launchtune.pipeline.store.shipped import SPEC_DIR, shipped_specs, spec_path
from launchtune.pipeline.store.spec import load_spec
from launchtune.pipeline.sweep.plan import plan_sweep
from tests.pipeline.conftest import one_line_error, run_cli_here


def test_the_list_names_every_shipped_spec_and_example(tmp_path):
    done = run_cli_here("examples", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names = {line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ")}
    assert names == {p.stem for p in SPEC_DIR.glob("*.yaml")} | {"convolution", "heat"}
    assert "  cfd_inlet_paper     GPU " in done.stdout and "  default             GPU or CPU " in done.stdout


def test_a_spec_by_name_is_the_shipped_file_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert spec_path("default") == spec_path("default.yaml") == SPEC_DIR / "default.yaml"
    assert set(shipped_specs()) >= {"default", "cfd_inlet_paper", "kernel_convolution"}
    plan = plan_sweep("default", samples=5, out=tmp_path / "out")
    assert plan.spec.name == "default" and plan.spec.samples == 5
    mine = tmp_path / "default"  # a file of the user's by that name wins over the shipped one
    mine.write_text((SPEC_DIR / "default.yaml").read_text().replace("name: default ", "name: mine "))
    assert spec_path("default") == Path("default") and load_spec("default").name == "mine"


def test_a_name_that_is_neither_a_file_nor_shipped_is_one_line(tmp_path):
    line = one_line_error(run_cli_here("sweep", "nosuch", cwd=tmp_path, allow_fake=False))
    assert line.startswith("error: nosuch: no such file, nor a shipped spec (shipped: cfd_inlet_cpu, ")
    line = one_line_error(
        run_cli_here("sweep", "cluster_configs/sweeps/default.yaml", cwd=tmp_path, allow_fake=False)
    )
    assert line.endswith("the shipped one is `launchtune sweep default`")
    assert not (tmp_path / "results").exists()


def test_an_example_is_copied_with_a_readme_and_its_spec_runs_from_the_copy(tmp_path):
    done = run_cli_here("examples", "convolution", "mine", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "mine"
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["README.md", "convolution.cu", "convolution.yaml", "kernel_convolution.yaml"]
    assert (folder / "convolution.cu").read_text() == (
        SPEC_DIR / "../../kernels/examples/convolution.cu"
    ).read_text()
    sweep = yaml.safe_load((folder / "kernel_convolution.yaml").read_text())
    assert sweep["options"]["spec"] == "convolution.yaml"  # the copy beside it, not the package's
    assert load_spec(folder / "kernel_convolution.yaml").options["spec"] == str(folder / "convolution.yaml")
    assert "launchtune sweep mine/kernel_convolution.yaml\n" in (folder / "README.md").read_text()
    # the heat example's reference is Python its spec names: the README's command allows it
    run_cli_here("examples", "kernel_heat", "heat", cwd=tmp_path)
    assert (
        "--allow-workload launchtune.kernels.examples.heat:reference"
        in (tmp_path / "heat/README.md").read_text()
    )


def test_a_copy_replaces_nothing_and_names_what_it_needs(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "default.yaml").write_text("mine\n")
    line = one_line_error(run_cli_here("examples", "default", "mine", cwd=tmp_path))
    assert line == "error: mine/default.yaml: exists; copy into a new or empty folder (nothing was written)"
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["default.yaml"]
    assert (tmp_path / "mine" / "default.yaml").read_text() == "mine\n"
    line = one_line_error(run_cli_here("examples", "nosuch", "x", cwd=tmp_path))
    assert line.startswith("error: 'nosuch': no such example (examples: convolution, heat; specs: ")
    line = one_line_error(run_cli_here("examples", "default", cwd=tmp_path))
    assert "name the folder to copy it into" in line
    assert not (tmp_path / "x").exists()


def test_the_notebooks_install_hint_names_what_works_where_launchtune_runs(tmp_path, monkeypatch):
    from launchtune.pipeline.commands import notebooks

    repo = Path(__file__).resolve().parents[2]
    assert notebooks.install_hint("notebooks") == f"pip install -e '.[test]' (in {repo})"  # this checkout
    installed = tmp_path / "site-packages" / "launchtune"  # a wheel's: no pyproject.toml beside it
    installed.mkdir(parents=True)
    monkeypatch.setattr(notebooks, "files", lambda package: installed)
    assert notebooks.install_hint("notebooks") == "pip install 'launchtune[notebooks]'"
