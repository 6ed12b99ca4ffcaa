"""``launchtune.sweep`` and ``launchtune.load``: a sweep spec run from Python, as the command line runs it,
on the caller's Dask cluster."""

from __future__ import annotations

import pytest

import launchtune
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.folder import SweepFolder
from tests.pipeline.conftest import FAKE, base_spec


@pytest.mark.slow
def test_a_spec_mapping_run_from_python(tmp_path, client):
    spec = base_spec(samples=12, batch_size=4)
    result = launchtune.sweep(spec, cluster=client, out=tmp_path / "out", seed=5, allow_workload=[FAKE])
    assert result.folder == tmp_path / "out"
    assert len(result.rows) == 12 and "ok" in set(result.rows["status"])  # the fake fails some on purpose
    assert SweepFolder(result.folder).read_spec()[0].seed == 5  # the override reached the sweep
    with pytest.warns(UserWarning, match="numpy backend .* launch parameters change nothing"):
        best = result.best  # a CPU's pick: the report's numpy note, as a warning
    assert result.gpu_classes == ["cpu"] and set(best) <= set(result.rows.columns)
    with pytest.warns(UserWarning, match="numpy backend"):
        assert launchtune.load(tmp_path / "out").best == best
    assert client.submit(len, [1, 2]).result() == 2  # still the caller's, still running


def test_the_command_lines_checks_come_first(tmp_path):
    with pytest.raises(UserError, match="is code the workers would import and run, and nothing allows it"):
        launchtune.sweep(base_spec(), out=tmp_path / "out")  # the fake workload, not allowed
    with pytest.raises(UserError, match="--samples: 0 random samples and no exhaustive sampler"):
        launchtune.sweep(base_spec(), samples=0, out=tmp_path / "out", allow_workload=[FAKE])
    with pytest.raises(UserError, match="not a sweep folder"):
        launchtune.load(tmp_path)
    assert not (tmp_path / "out").exists()
