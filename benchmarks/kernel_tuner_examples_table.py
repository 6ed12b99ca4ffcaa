"""The table of docs/kernel.md's "Kernel Tuner's examples": from a committed ``examples.json``
(``benchmarks/kernel_tuner_examples_gpu.sh``), per example and tool: wall time, each call's pick and its time,
rows ok of rows. ``python -m benchmarks.kernel_tuner_examples_table data/kernel_tuner_examples/examples.json``
prints the Markdown table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks import run_main


def table(rows: list[dict]) -> str:
    lines = ["| example | tool | wall s | ran | pick (first call) | its ms | rows ok |", "| --- " * 7 + "|"]
    for row in rows:
        calls = row.get("calls") or []
        first = calls[0] if calls else {}
        pick = ", ".join(f"{k}={v}" for k, v in (first.get("pick") or {}).items()) or "-"
        best = f"{first['best_time_ms']:.4g}" if first.get("best_time_ms") is not None else "-"
        ok = f"{sum(c['ok'] for c in calls)} of {sum(c['rows'] for c in calls)}" if calls else "-"
        ran = (
            "yes"
            if row["rc"] == 0
            else (row["last_lines"][-1][:60] if row["last_lines"] else f"rc {row['rc']}")
        )
        lines.append(
            f"| {row['example']} | {row['tool']} | {row['seconds']:.1f} | {ran} | {pick} | {best} | {ok} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path, help="an examples.json of benchmarks/kernel_tuner_examples.py")
    args = parser.parse_args()
    print(table(json.loads(args.examples.read_text())))
    return 0


if __name__ == "__main__":
    run_main(main)
