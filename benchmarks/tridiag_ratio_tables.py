"""Markdown tables of a ``ratios.csv`` folder (``tridiag_device_graph``, ``tridiag_ordered_copies``,
``tridiag_streamed``).

Reads ``ratios.csv`` (size, a, b, ratio, low, high, verdict, a_ms, b_ms[, b_over_serial_floor]) and
``meta.json`` of each folder given and prints one table per folder: the provenance line, then every comparison
B / A with its 95% interval and the verdict the interval decides. The data READMEs paste this output.

    python -m benchmarks.tridiag_ratio_tables data/tridiag/h100/device_graph data/tridiag/h100/ordered_copies
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from benchmarks import run_main


def provenance(meta: dict) -> str:
    d = meta["device"]
    return (
        f"{d['device_name']}, CUDA runtime {d['cuda_runtime']}, driver API {d['cuda_driver']}, CuPy "
        f"{meta['cupy']}, numpy {meta['numpy']}, {meta['date']}, commit {meta['commit']}, "
        f"{meta['rounds']} interleaved rounds, {round(100 * meta['confidence'])}% bootstrap intervals"
    )


def table(folder: Path) -> str:
    meta = json.loads((folder / "meta.json").read_text())
    with (folder / "ratios.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    floor = "b_over_serial_floor" in rows[0]
    head = "| size | B / A | B ms | A ms | B / A [95%] | verdict |" + (" B / serial floor |" if floor else "")
    rule = "| ---: | --- | ---: | ---: | ---: | --- |" + (" ---: |" if floor else "")
    lines = [f"`{folder.name}`: {provenance(meta)}.", "", head, rule]
    for r in rows:
        line = (
            f"| {int(r['size']):,} | {r['b']} / {r['a']} | {float(r['b_ms']):.4f} | {float(r['a_ms']):.4f} | "
            f"{float(r['ratio']):.3f} [{float(r['low']):.3f}, {float(r['high']):.3f}] | {r['verdict']} |"
        )
        if floor:  # empty where B is not host to host (stage 2 alone); an interval where rounds probed it
            value = f" {float(r['b_over_serial_floor']):.3f}" if r["b_over_serial_floor"] else ""
            if value and r.get("floor_low"):
                value += f" [{float(r['floor_low']):.3f}, {float(r['floor_high']):.3f}]"
            line += value + " |"
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path)
    args = ap.parse_args(argv)
    print("\n\n".join(table(f) for f in args.folders))
    return 0


if __name__ == "__main__":
    run_main(main)
