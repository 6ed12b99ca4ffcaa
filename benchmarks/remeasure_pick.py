"""Re-measure a sweep folder's predicted best on this machine's GPU without measuring the sweep again.

    python -m benchmarks.remeasure_pick DIR [--gpu-class h100]

For a committed folder whose models or features changed after its GPU session (the fused sweeps after the
plan learnt which parameters a level leaves unused): trains the folder's models anew, as ``python -m pipeline
train`` does, then runs the sweep's own re-measure step (``pipeline.sweep.run.remeasure_picks``: the search
model ranks a fresh pool, the best that run are measured, the pick is timed against the default in interleaved
rounds) in this process instead of on a Dask worker, and writes the report. Only the named class is
re-measured (it must be the GPU this runs on); the others keep their entries.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pipeline.learn.report import build_report
from pipeline.learn.train import train_sweep
from pipeline.sweep.folder import SweepFolder
from pipeline.sweep.run import remeasure_picks


class _Done:
    def __init__(self, value: Any):
        self.value = value

    def result(self, timeout: float | None = None) -> Any:
        return self.value


class InlineClient:
    """What ``remeasure_picks`` needs of a Dask client, run here: the task runs at once in this process."""

    def submit(self, fn: Any, *args: Any, resources: Any = None, pure: Any = None, key: Any = None) -> _Done:
        return _Done(fn(*args))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", type=Path, help="a sweep folder (sweep.json, merged/, plan/)")
    p.add_argument("--gpu-class", required=True, help="the class to re-measure: the GPU this runs on")
    args = p.parse_args()
    folder = SweepFolder(args.dir)
    spec, _ = folder.read_spec()
    plan = folder.read_plan(args.gpu_class)
    if plan is None:
        raise SystemExit(f"error: {args.dir}: no plan/{args.gpu_class}.json")
    trained = train_sweep(args.dir, print)
    plans: dict[str, dict] = {args.gpu_class: dict(plan)}
    remeasure_picks(InlineClient(), spec, plans, trained["models"], trained["metrics"], args.dir, print)
    build_report(args.dir, print)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
