"""Re-measure a sweep folder's predicted best on this machine's GPU without measuring the sweep again.

    python -m benchmarks.remeasure_pick DIR [--gpu-class h100]

For a committed folder whose models or features changed after its GPU session (the fused sweeps after the
plan learnt which parameters a level leaves unused): trains the folder's models anew, as ``launchtune
train`` does, then runs the sweep's own re-measure step (``pipeline.sweep.run.remeasure_picks``: the search
model ranks a fresh pool, the best that run are measured, the pick is timed against the default in interleaved
rounds) in this process instead of on a Dask worker, and writes the report. Only the named class is
re-measured (it must be the GPU this runs on); the others keep their entries.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from launchtune.kernels.compare import compare, interleaved
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.jsonio import write_json
from launchtune.pipeline.learn.train import train_sweep
from launchtune.pipeline.results.report import build_report, first_runnable
from launchtune.pipeline.store.folder import SweepFolder
from launchtune.pipeline.store.shards import load_merged
from launchtune.pipeline.store.workloads import check_allow_flag, check_workload
from launchtune.pipeline.sweep.run import remeasure_picks
from launchtune.pipeline.sweep.worker import get_workload


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
    p.add_argument("--rounds", type=int, default=21, help="interleaved rounds of pick vs best row (21)")
    p.add_argument("--allow-workload", action="append", default=[], help="as for launchtune sweep")
    args = p.parse_args()
    folder = SweepFolder(args.dir)
    spec, _ = folder.read_spec()
    try:  # the folder's spec names the code this process builds: allowed as a sweep's would be (issue 14)
        check_workload(
            spec.workload,
            [check_allow_flag(v) for v in args.allow_workload],
            f"{folder.meta_path}: spec.workload",
        )
    except UserError as exc:
        raise SystemExit(f"error: {exc}") from None
    plan = folder.read_plan(args.gpu_class)
    if plan is None:
        raise SystemExit(f"error: {args.dir}: no plan/{args.gpu_class}.json")
    trained = train_sweep(args.dir, print)
    plans: dict[str, dict] = {args.gpu_class: dict(plan)}
    answers = remeasure_picks(
        InlineClient(), spec, plans, trained["models"], trained["metrics"], args.dir, print
    )
    folder.write_validation({**(folder.read_validation() or {}), **answers})
    build_report(args.dir, print)
    print(pick_vs_best_row(args.dir, spec.to_dict(), args.gpu_class, plan["params"], args.rounds))
    return 0


def pick_vs_best_row(
    folder: Path, spec: dict[str, Any], gpu_class: str, params: list[str], rounds: int
) -> dict[str, Any]:
    """The re-measured pick against the class's fastest ok row of the merged data, interleaved."""
    merged = load_merged(folder)
    rows = merged[(merged["gpu_class"] == gpu_class) & (merged["status"] == "ok")]
    best = rows.loc[rows["total_ms"].idxmin()]
    best_config = {p: int(best[p]) for p in params}
    pick = first_runnable((SweepFolder(folder).read_validation() or {}).get(gpu_class))
    if pick is None:
        raise SystemExit(f"error: {folder}: no re-measured pick for {gpu_class}")
    workload, _ = get_workload(spec)
    space = workload.space()
    repeats = spec["validate"]["repeats"]

    def time_of(config: dict[str, int]) -> Any:
        valid = space.validate(config)
        return lambda: float(workload.run(valid, repeats).total)

    a, b = interleaved(time_of(best_config), time_of(pick["config"]), rounds)
    comparison = compare(a, b, seed=spec["seed"] + 2).as_dict()
    result = {
        "gpu_class": gpu_class,
        "best_row": {"config": best_config, "recorded_ms": float(best["total_ms"])},
        "pick": {"config": pick["config"]},
        "same_configuration": space.active_key(best_config) == space.active_key(pick["config"]),
        "comparison": {**comparison, "best_row_ms": a, "pick_ms": b},
        "meaning": "time of the pick / time of the best recorded row, interleaved rounds, 95% interval",
    }
    write_json(folder / "pick_vs_best_row.json", result)
    verdict = {k: comparison[k] for k in ("ratio", "low", "high", "verdict")}
    return {"same_configuration": result["same_configuration"], **verdict}


if __name__ == "__main__":
    raise SystemExit(main())
