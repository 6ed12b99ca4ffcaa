"""The time-energy figure of ``benchmarks/energy_convolution.py``'s data: every measured configuration, the
Pareto front (no other configuration is both faster and uses less energy), the default and the pick under
each objective.

    python -m benchmarks.energy_figure data/convolution/h100/energy/energy.json  # pareto.png beside it
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

from benchmarks import run_main

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from launchtune.pipeline.results.energy import pareto_front  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", type=Path)
    p.add_argument("--out", type=Path, default=None, help="the PNG (default: pareto.png beside the data)")
    args = p.parse_args(argv)
    d = json.loads(args.data.read_text())
    rows = [r for r in d["rows"] if r.get("energy_mJ") is not None]
    points = [(r["time_ms"], r["energy_mJ"]) for r in rows]
    front = pareto_front([t for t, _ in points], [e for _, e in points])
    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=120)
    ax.scatter(*zip(*points, strict=True), s=14, color="0.6", label=f"configurations ({len(rows)})")
    fx, fy = zip(*(points[i] for i in front), strict=True)
    ax.plot(fx, fy, "-o", color="tab:green", ms=5, label="Pareto front")
    keyed = {json.dumps(r["config"], sort_keys=True): (r["time_ms"], r["energy_mJ"]) for r in rows}
    picks = d.get("picks", {})
    marks = {"default": ("s", "tab:red"), "time": ("^", "tab:blue"), "energy": ("v", "tab:orange")}
    for name, (marker, colour) in marks.items():
        if name in picks:
            x, y = keyed[json.dumps(picks[name], sort_keys=True)]
            label = {
                "default": "default",
                "time": "pick: minimize time",
                "energy": "pick: minimize energy_mJ",
            }
            ax.scatter([x], [y], marker=marker, s=90, facecolors="none", edgecolors=colour, lw=2,
                       label=label[name])  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time per launch (ms, median)")
    ax.set_ylabel("energy per launch (mJ, NVML counter)")
    ax.set_title(f"convolution {d['size']}: time and energy per configuration")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = args.out or args.data.with_name("pareto.png")
    fig.savefig(out)
    print(out)
    return 0


if __name__ == "__main__":
    run_main(main)
