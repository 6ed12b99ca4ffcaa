"""A new workload is one class and one registry line: a toy, checked in a spec and searched."""

from __future__ import annotations

import pytest

from launchtune.kernels.space import Param, Space
from launchtune.kernels.workload import Check, Timing, Workload, WorkloadError
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store import workloads
from launchtune.pipeline.store.spec import parse_spec
from launchtune.pipeline.strategies import get_strategy
from launchtune.pipeline.strategies.base import Session


class ToyWorkload(Workload):
    name = "toy"  # one kernel whose time is least at 128 threads

    @classmethod
    def check_arguments(cls, case, size, **options):
        if case != "line" or options:
            raise WorkloadError(f"unknown toy case {case!r} (known: line; no options)", "case")

    def __init__(self, case, size, backend="numpy"):
        self.case, self.size = case, (int(size),)
        self._space = Space((Param("threads", (32, 64, 128, 256, 512)),), {"threads": 32}, name="toy")

    def space(self):
        return self._space

    def run(self, config, repeats):
        ms = 1.0 + abs(config["threads"] - 128) / 128
        return Timing({"line": ms}, ms, repeats)

    def check(self, config):
        return Check(True)

    def describe(self):
        return {"workload": self.name, "case": self.case, "kernels": ["line"]}


def make_workload(case, size, backend="numpy", **options):  # the factory the registry calls on a worker
    ToyWorkload.check_arguments(case, size, **options)
    return ToyWorkload(case, size, backend)


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(workloads.REGISTERED, "toy", f"{__name__}:ToyWorkload")  # the one line to add


def test_a_spec_naming_the_toy_is_checked_by_its_class_and_searched(registered):
    spec = parse_spec({"name": "t", "workload": "toy", "case": "line", "size": 64}, "toy.yaml")
    with pytest.raises(UserError, match="^toy.yaml: case: unknown toy case 'ring'"):
        parse_spec({"name": "t", "workload": "toy", "case": "ring", "size": 64}, "toy.yaml")
    built = workloads.make_workload(spec.workload, spec.case, spec.size, spec.backend, **spec.options)
    session = Session(built, budget=5, seed=0, repeats=1)  # the whole space: its best is known
    get_strategy("default")(session)
    assert session.used == 5 and session.best().config == {"threads": 128}
