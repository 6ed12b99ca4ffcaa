from __future__ import annotations

import pytest
import yaml

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.spec import SweepSpec, load_spec, parse_spec
from tests.pipeline.conftest import REPO, base_spec


def test_shipped_specs_load():
    default = load_spec(REPO / "cluster_configs/sweeps/default.yaml")
    assert (default.workload, default.case, default.size) == ("cfd", "inlet", "208x64")
    paper = load_spec(REPO / "cluster_configs/sweeps/cfd_inlet_paper.yaml")
    assert paper.size == "3328x1024" and paper.samples == 10000 and paper.test_fraction == 0.25
    assert set(paper.samplers) == {"random", "per_kernel_exhaustive"}
    assert default.validate.incumbents == 3 and paper.validate.incumbents == 3  # the sweep's best, re-ranked
    assert parse_spec(base_spec(validate={"incumbents": 0}), "s.yaml").validate.incumbents == 0


def test_round_trip_through_dict():
    spec = parse_spec(base_spec(gpu_classes=["cpu", "h100"]), "s.yaml")
    assert SweepSpec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize(
    "change, field",
    [
        ({"samplez": 3}, "unknown key 'samplez'"),
        ({"samples": -1}, "samples"),
        ({"samples": "many"}, "samples"),
        ({"backend": "opencl"}, "backend"),
        ({"size": "3328by1024"}, "size"),
        ({"samplers": ["random", "grid"]}, "samplers"),
        ({"gpu_classes": ["h100", "../x"]}, "gpu_classes: '../x' must be a plain name"),
        ({"validate": {"top": 3}}, "validate: unknown key 'top'"),
        ({"validate": {"incumbents": -1}}, "validate.incumbents"),
        ({"train": {"hidden_layers": [0]}}, "train.hidden_layers"),
        ({"test_fraction": 0.9}, "test_fraction"),
        ({"name": "../escape"}, "name"),
        ({"output": "../../etc"}, "outside the results folder"),
        ({"output": "/tmp/elsewhere"}, "outside the results folder"),
    ],
)
def test_bad_values_name_file_and_field(tmp_path, change, field):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(base_spec(**change)))
    with pytest.raises(UserError) as err:
        load_spec(path)
    assert str(path) in str(err.value) and field in str(err.value)


def test_missing_required_key(tmp_path):
    data = base_spec()
    del data["case"]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match="missing key 'case'"):
        load_spec(path)


def test_output_inside_results_is_accepted(tmp_path, monkeypatch):
    monkeypatch.setenv("LAUNCHTUNE_RESULTS", str(tmp_path / "results"))
    spec = parse_spec(base_spec(output="team/run1"), "s.yaml")
    assert spec.default_out() == (tmp_path / "results" / "team" / "run1").resolve()
    assert parse_spec(base_spec(), "s.yaml").default_out() == (tmp_path / "results" / "fake").resolve()


def test_output_through_symlink_out_of_results_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "results"
    root.mkdir()
    (root / "link").symlink_to(tmp_path / "outside", target_is_directory=True)
    monkeypatch.setenv("LAUNCHTUNE_RESULTS", str(root))
    with pytest.raises(UserError, match="outside the results folder"):
        parse_spec(base_spec(output="link/x"), "s.yaml")
