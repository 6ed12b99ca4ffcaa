"""What the sweep's worker does for a compiling workload and an exhaustive plan (no GPU needed): each batch's
configurations are handed to the workload's ``compile_ahead`` before the first is measured, and the
``exhaustive`` sampler plans every valid configuration once."""

from __future__ import annotations

import pytest

from launchtune.kernels.workload import WorkloadError
from launchtune.pipeline.store.spec import parse_spec
from launchtune.pipeline.sweep import worker
from tests.pipeline.conftest import base_spec
from tests.pipeline.fake_workload import FakeWorkload

PLAN = {"params": ["a.blocks", "a.threads", "b.blocks", "b.threads"], "kernels": ["a", "b"]}


def test_each_batch_is_handed_to_compile_ahead_before_measuring(tmp_path, monkeypatch):
    events: list[tuple[str, object]] = []
    ahead = lambda self, configs: events.append(("ahead", configs))  # noqa: E731
    monkeypatch.setattr(FakeWorkload, "compile_ahead", ahead, raising=False)
    original = FakeWorkload.check
    monkeypatch.setattr(
        FakeWorkload, "check", lambda self, c: events.append(("check", c)) or original(self, c)
    )
    spec = parse_spec(base_spec(), "test").to_dict()
    rows = [
        (0, "random", {"a.blocks": 2, "a.threads": 64, "b.blocks": 2, "b.threads": 32}),
        (1, "random", {"a.blocks": 4, "a.threads": 32, "b.blocks": 1, "b.threads": 64}),
    ]
    path = tmp_path / "shards" / "gpu_class=cpu" / "shard-00000.parquet"
    result = worker.measure_batch(spec, PLAN, "cpu", "00000", rows, str(path), str(tmp_path))
    assert result["rows"] == 2
    assert events[0] == ("ahead", [r[2] for r in rows])  # once, all of the batch, before the first check
    assert [kind for kind, _ in events] == ["ahead", "check", "check"]


def test_the_exhaustive_sampler_plans_every_valid_configuration(monkeypatch):
    spec = parse_spec({**base_spec(), "samplers": ["exhaustive"], "samples": 0}, "test").to_dict()
    plan = worker.plan_task(spec, ["exhaustive"], 0, 0)
    workload, _ = worker.get_workload(spec)
    configs = [c for _, c in plan["configs"]]
    assert configs == list(workload.space().grid())
    assert len(configs) == len({tuple(c.values()) for c in configs}) > 0
    assert {s for s, _ in plan["configs"]} == {"exhaustive"}
    monkeypatch.setattr(worker, "EXHAUSTIVE_LIMIT", 10)
    with pytest.raises(WorkloadError, match="the exhaustive sampler over 72 configurations"):
        worker.plan_task(spec, ["exhaustive"], 0, 0)
