"""Spec values that size memory or time are bounded, checked with the file and field named, before any
cluster starts (issue 14: ``samples: 10**12``, ``validate.pool: 10**10``, ``hidden_layers: [200000, 200000]``,
``seed: 2**70``)."""

from __future__ import annotations

import pytest

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.spec import LIMITS, MAX_LAYERS, parse_spec
from tests.pipeline.conftest import base_spec, one_line_error, run_cli_here


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"samples": 10**12}, "spec.yaml: samples: at most 1,000,000"),
        ({"validate": {"pool": 10**10}}, "spec.yaml: validate.pool: at most 1,000,000"),
        ({"validate": {"top_k": 10**6}}, "spec.yaml: validate.top_k: at most"),
        (
            {"train": {"hidden_layers": [200000, 200000]}},
            r"spec.yaml: train.hidden_layers\[0\]: at most 4,096",
        ),
        (
            {"train": {"hidden_layers": [8] * (MAX_LAYERS + 1)}},
            "train.hidden_layers: must be a list of 1 to 8",
        ),
        ({"train": {"max_epochs": 10**9}}, "spec.yaml: train.max_epochs: at most"),
        ({"seed": 2**70}, "spec.yaml: seed: at most 4,294,967,295"),
        ({"seed": 2**32}, "spec.yaml: seed: at most"),  # scikit-learn's random_state limit
        ({"batch_size": 10**9}, "spec.yaml: batch_size: at most"),
        ({"repeats": 10**9}, "spec.yaml: repeats: at most"),
    ],
)
def test_a_value_past_its_limit_names_file_and_field(overrides, match):
    with pytest.raises(UserError, match=match):
        parse_spec(base_spec(**overrides), "spec.yaml")


def test_the_limits_themselves_are_accepted():
    spec = parse_spec(
        base_spec(samples=LIMITS["samples"], seed=2**32 - 1, train={"hidden_layers": [4096] * MAX_LAYERS}),
        "spec.yaml",
    )
    assert spec.samples == LIMITS["samples"] and spec.seed == 2**32 - 1


@pytest.mark.parametrize(
    "overrides, extra, match",
    [
        ({"samples": 10**12}, [], "samples: at most"),
        ({"seed": 2**70}, [], "seed: at most"),
        ({}, ["--samples", str(10**12)], "--samples: at most 1,000,000"),
        ({}, ["--seed", str(2**64)], "--seed: at most"),
        ({}, ["--seed", str(2**32)], "--seed: at most 4,294,967,295"),
    ],
)
def test_the_cli_refuses_before_any_cluster_starts(tmp_path, write_spec, overrides, extra, match):
    spec = write_spec(**overrides)
    out = tmp_path / "out"
    line = one_line_error(run_cli_here("sweep", str(spec), "--out", str(out), *extra, cwd=tmp_path))
    assert match in line
    assert not out.exists()  # no folder, no cluster files: nothing started
