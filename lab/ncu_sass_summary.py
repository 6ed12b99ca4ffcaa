"""Where a kernel's instructions and stalls go, from Nsight Compute's per-instruction (SASS) page.

Reads the CSV that ``ncu --import R.ncu-rep --page source --csv --print-source sass`` writes (gzipped or not;
``lab/cfd_fused_ncu.sh`` with SOURCE=1 makes one per configuration) and prints the executed
instructions and the warp-stall samples per opcode, then the stall reasons' shares and the instructions that
collect the most samples. The CSV's own columns are summed; nothing is estimated.

    python -m lab.ncu_sass_summary data/cfd/h100/stage_tuning/ncu_d805f5c/best_arith1.sass.csv.gz
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import re
from collections import Counter
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
OPCODE = re.compile(r"(?:@!?U?P\w+\s+)?([A-Z0-9_]+)")


def _number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read_rows(path: Path) -> list[dict[str, str]]:
    raw = path.read_bytes()
    text = gzip.decompress(raw).decode() if path.suffix == ".gz" else raw.decode()
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith('"Address"'))
    return list(csv.DictReader(io.StringIO("\n".join(lines[header:]))))


def summarize(rows: list[dict[str, str]], top: int) -> str:
    executed: Counter[str] = Counter()
    samples: Counter[str] = Counter()
    stalls: Counter[str] = Counter()
    for r in rows:
        m = OPCODE.match(r["Source"].strip())
        op = m.group(1) if m else "?"
        executed[op] += _number(r[EXECUTED])
        samples[op] += _number(r[SAMPLES])
        for key, value in r.items():
            if key.startswith("stall_") and "Not Issued" not in key:
                stalls[key[len("stall_") :]] += _number(value)
    n_exec, n_samp, n_stall = sum(executed.values()), sum(samples.values()), sum(stalls.values())
    out = [
        f"{n_exec:,.0f} warp instructions executed, {n_samp:,.0f} stall samples, {len(rows)} SASS lines",
        "",
    ]
    out += ["| opcode | % of instructions | % of stall samples |", "| --- | ---: | ---: |"]
    out += [
        f"| {op} | {100 * c / n_exec:.1f} | {100 * samples[op] / n_samp:.1f} |"
        for op, c in executed.most_common(top)
    ]
    out += [
        "",
        "stall reasons: " + ", ".join(f"{k} {100 * v / n_stall:.1f}%" for k, v in stalls.most_common(8)),
    ]
    out += ["", "| instruction | % of stall samples | executed |", "| --- | ---: | ---: |"]
    hot = sorted(rows, key=lambda r: -_number(r[SAMPLES]))[:top]
    for r in hot:
        share = 100 * _number(r[SAMPLES]) / n_samp
        out.append(f"| `{r['Source'].strip()}` | {share:.1f} | {_number(r[EXECUTED]):,.0f} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", type=Path, help="the SASS page as CSV (.csv or .csv.gz)")
    ap.add_argument("--top", type=int, default=12, help="opcodes and instructions to list (default 12)")
    args = ap.parse_args()
    if not args.csv.is_file():
        ap.error(f"{args.csv}: no such file")
    print(summarize(read_rows(args.csv), args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
