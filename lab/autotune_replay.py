"""Replay a recorded scan under two sampling rules and score each pick against exhaustive per-kernel data.

    python -m lab.autotune_replay data/cfd/h100/autotune [--stages 4]

The launch log of a ``scan`` run holds every scan launch's milliseconds; ``exhaustive.csv`` each (blocks,
threads)'s time per step measured alone. The replay ranks each kernel's candidates by (a) the median of its
five one-launch samples (the rule the run used) and (b) whole-step samples: the sum of ``stages`` consecutive
launches, one per Runge-Kutta stage (the rule the tuner uses since), and reports each pick's exhaustive time
over the exhaustive best. No GPU needed: it reads what a GPU run recorded.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd


def replay(log: pd.DataFrame, exhaustive: pd.DataFrame, stages: int) -> dict:
    out = {}
    scan = log[log["state"] == "startup"]
    for kernel, rows in scan.groupby("kernel", sort=False):
        rows = rows.sort_values("seq").iloc[1:]  # the warm-up launch picks nothing
        alone = exhaustive[exhaustive["kernel"] == kernel].set_index(["blocks", "threads"])["ms"]
        best = float(alone.min())
        one_launch, whole_step = {}, {}
        for (b, t), g in rows.groupby(["blocks", "threads"], sort=False):
            ms = g["time_ms"].to_numpy()
            one_launch[(b, t)] = float(np.median(ms))
            windows = [ms[i : i + stages].sum() for i in range(0, len(ms) - stages + 1, stages)]
            if windows:
                whole_step[(b, t)] = float(np.median(windows))
        entry = {"exhaustive_best": list(map(int, alone.idxmin())), "best_ms": best}
        for rule, scores in (("one_launch_median", one_launch), ("whole_step", whole_step)):
            pick = min(scores, key=scores.get)
            entry[rule] = {"pick": [int(pick[0]), int(pick[1])], "over_best": float(alone[pick]) / best}
        out[kernel] = entry
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", help="a folder with launches_scan.csv.gz and exhaustive.csv")
    ap.add_argument("--stages", type=int, default=4, help="launches of each kernel per solver step")
    args = ap.parse_args()
    folder = Path(args.folder)
    log = pd.read_csv(folder / "launches_scan.csv.gz")
    exhaustive = pd.read_csv(folder / "exhaustive.csv")
    result = replay(log, exhaustive, args.stages)
    (folder / "replay.json").write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"{'kernel':12} {'best':>12} {'1-launch pick':>14} {'/best':>6} {'whole-step pick':>16} {'/best':>6}"
    )
    for k, e in result.items():
        a, b = e["one_launch_median"], e["whole_step"]
        pick_a, pick_b = str(tuple(a["pick"])), str(tuple(b["pick"]))
        best = str(tuple(e["exhaustive_best"]))
        print(f"{k:12} {best:>12} {pick_a:>14} {a['over_best']:6.3f} {pick_b:>16} {b['over_best']:6.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
