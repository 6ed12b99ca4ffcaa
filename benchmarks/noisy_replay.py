"""Live noise for replays, fitted from live searches' records (issue 53), and the live worst seed beside it.

``fit``: a ``NoiseModel`` JSON from the ``remeasure.json`` files of live searches against one sweep (each
file one live call: the sweep's fastest rows re-measured, recorded time beside it, and every search's pick
as the search measured it and as re-measured):

    python -m benchmarks.noisy_replay fit --reference data/cfd/h100/sweep_fused_arith \\
        --out data/combined/search_worst_seed/noisy_replay/noise_h100.json data/**/remeasure.json

``table``: per sweep and budget, the replays in ``search_worst_seed`` records (``--runs``, noisy or not)
beside the live searches of the given files (ratios: the pick re-measured over the sweep's best row
re-measured): seeds, mean, worst, seeds over 1.05, the worst of seeds 0-4, and the expected worst of 5
seeds drawn from those replayed (every 5 of them alike, so no random draw):

    python -m benchmarks.noisy_replay table --reference data/cfd/h100/sweep_fused_arith \
        --runs data/combined/search_worst_seed/noisy_replay/runs.jsonl \
        data/combined/search_worst_seed/live_h100_400/*/remeasure.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks import run_main


def _calls(files: list[Path], reference: str) -> list[dict[str, Any]]:
    """The live calls against ``reference`` (a sweep folder, as ``remeasure.json`` names it)."""
    calls = []
    for f in files:
        d = json.loads(f.read_text())
        if str(d.get("reference", "")).rstrip("/").removesuffix("/merged") == reference.rstrip("/"):
            calls.append({"file": str(f), **d})
    return calls


def fit(files: list[Path], reference: str) -> dict[str, Any]:
    """The model (recorded repeats: none on the fused sweeps, so the replay's own noise is 0) and what it
    was fitted from."""
    from launchtune.pipeline.strategies.replay import NoiseModel

    calls = _calls(files, reference)
    offsets = [[r["remeasured_ms"] / r["recorded_ms"] for r in c["reference_rows"]] for c in calls]
    measured = [[s["pick_search_ms"] / s["remeasured_ms"] for s in c["searches"]] for c in calls]
    model = NoiseModel.fit(offsets, measured)
    return {
        "model": model.as_dict(),
        "reference": reference,
        "calls": [c["file"] for c in calls],
        "offsets": sum(len(o) for o in offsets),
        "measurements": sum(len(m) for m in measured),
    }


def live(files: list[Path], reference: str) -> list[dict[str, Any]]:
    """Each live search: strategy, budget, seed, ratio against the best row re-measured, and its call."""
    return [
        {
            "call": c["file"],
            "strategy": s["strategy"],
            "budget": s["budget"],
            "seed": s["seed"],
            "ratio": s["against_best_row"]["ratio"],
        }
        for c in _calls(files, reference)
        for s in c["searches"]
    ]


def worst_of(ratios: list[float], k: int = 5) -> float:
    """The expected largest of ``k`` values drawn without replacement from ``ratios``: the i-th smallest is
    the largest of the k with chance C(i - 1, k - 1) / C(n, k)."""
    from math import comb

    x = sorted(ratios)
    n = len(x)
    if n < k:
        return float("nan")
    return sum(v * comb(i, k - 1) for i, v in enumerate(x)) / comb(n, k)


def table(runs: list[dict[str, Any]], lives: list[dict[str, Any]]) -> str:
    """The markdown table of ``table`` (the module's docstring)."""
    lines = [
        "| searches | budget | seeds | mean | worst | over 1.05 | worst of seeds 0-4 | expected worst of 5 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    groups: dict[tuple, dict[int, float]] = {}
    for r in runs:
        noise = "noisy replay" if r.get("live_noise") else "replay"
        name = f"{noise} {r['variant']}, {r['dataset'].removeprefix('data/').removesuffix('/merged')}"
        groups.setdefault((name, r["budget"]), {})[r["seed"]] = r["ratio"]
    for r in lives:
        groups.setdefault((f"live {r['strategy']}", r["budget"]), {})[r["seed"]] = r["ratio"]
    for (name, budget), by_seed in sorted(groups.items()):
        v = list(by_seed.values())
        first = [by_seed[s] for s in range(5) if s in by_seed]
        over = sum(x >= 1.05 for x in v)
        lines.append(
            f"| {name} | {budget} | {len(v)} | {sum(v) / len(v):.3f} | {max(v):.3f} | {over} | "
            f"{max(first):.3f} | {worst_of(v):.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["fit", "live", "table"])
    p.add_argument("files", nargs="*", type=Path, help="remeasure.json files of live calls")
    p.add_argument("--reference", required=True, help="the sweep folder the live calls re-measured")
    p.add_argument("--out", type=Path, help="fit: the JSON to write (the model and its provenance)")
    p.add_argument(
        "--runs", type=Path, action="append", default=[], help="table: replays' records (repeatable)"
    )
    p.add_argument("--variant", default="final", help="table: the replays' variant (default final)")
    a = p.parse_intermixed_args(argv)  # the files before or after the options, as the README writes them
    if a.what == "fit":
        found = fit(a.files, a.reference)
        text = json.dumps(found, indent=1) + "\n"
        if a.out:
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.with_suffix(".fit.json").write_text(text)
            a.out.write_text(json.dumps(found["model"], indent=1) + "\n")
        print(text, end="")
    elif a.what == "table":
        runs = [json.loads(line) for path in a.runs for line in path.read_text().splitlines() if line.strip()]
        mine = [
            r
            for r in runs
            if r["dataset"].removesuffix("/merged") == a.reference.rstrip("/") and r["variant"] == a.variant
        ]
        print(table(mine, live(a.files, a.reference)), end="")
    else:
        for r in live(a.files, a.reference):
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    run_main(main)
