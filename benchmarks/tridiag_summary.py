"""Summarise a ``benchmarks/tridiag_streams.py`` folder (or two, side by side): the tables of
``data/tridiag/<class>/README.md``, computed from the CSVs rather than typed.

    python benchmarks/tridiag_summary.py data/tridiag/h100                     # one class
    python benchmarks/tridiag_summary.py data/tridiag/h100 data/tridiag/h200   # each, then the comparison

Speed-up of the best stream count over one stream, three ways, because stage 2 (the host) jumps between runs
and a slow host stage in the one-stream run inflates the raw figure:
  * raw:       median end-to-end T(1) / min_k median T(k) (what the benchmark prints);
  * fastest:   the fastest of the repeats at k = 1 over the fastest at any k (the host jumps only upwards);
  * denoised:  stage1_span + stage3_span at each k plus the size's one-stream host time, the same for every k
               (``python -m pipeline streams --denoise-host``): streams only act on stages 1 and 3.
``saved ms`` is what the streams take off the device stages (spans at k = 1 minus at the best k), which does
not depend on the host stage at all. A size is flagged (``*``) where the raw speed-up and the denoised one
differ by more than ``FLAG`` (0.10): there the host stage's jumps, not the streams, decide the raw figure.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

FLAG = 0.10


def _sz(n: int) -> str:
    return f"{n:,}"


def load(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    streams = pd.read_csv(folder / "streams.csv")
    streams = streams[(streams["threads"] == 256) & (streams["m"] == 10)]
    base = pd.read_csv(folder / "baselines.csv").set_index("size")
    meta = json.loads((folder / "meta.json").read_text())
    return streams, base, meta


def per_size(streams: pd.DataFrame, base: pd.DataFrame) -> pd.DataFrame:
    """One row per size with every figure the README quotes."""
    rows = []
    for n, g in streams.groupby("size"):
        g = g.set_index("streams").sort_index()
        dev = g["stage1_span"] + g["stage3_span"]
        host1 = float(g["t2_host"].median())
        den = dev + host1
        raw_k = int(g["total_ms"].idxmin())
        dev_k = int(dev.idxmin())
        fast_k = int(g["total_min"].idxmin())
        others = g["host_span"].drop(index=1)
        raw_x = float(g.loc[1, "total_ms"] / g.loc[raw_k, "total_ms"])
        den_x = float(den.loc[1] / den.loc[dev_k])
        b = base.loc[n]
        rows.append(
            {
                "size": int(n),
                "raw_k": raw_k,
                "raw_1": float(g.loc[1, "total_ms"]),
                "raw_best": float(g.loc[raw_k, "total_ms"]),
                "raw_x": raw_x,
                "fast_k": fast_k,
                "fast_x": float(g.loc[1, "total_min"] / g.loc[fast_k, "total_min"]),
                "host1": float(g.loc[1, "host_span"]),
                "host_med_others": float(others.median()),
                "host_one_stream": host1,
                "dev_k": dev_k,
                "dev_1": float(dev.loc[1]),
                "dev_best": float(dev.loc[dev_k]),
                "saved_ms": float(dev.loc[1] - dev.loc[dev_k]),
                "den_1": float(den.loc[1]),
                "den_best": float(den.loc[dev_k]),
                "den_x": den_x,
                "den_by_k": den.to_dict(),
                "flag": abs(raw_x - den_x) > FLAG,
                "gtsv2": float(b["gtsv2_ms"]),
                "gtsv2_nopivot": float(b["gtsv2_nopivot_ms"]),
                "raw_over_gtsv2": float(g.loc[raw_k, "total_ms"] / b["gtsv2_ms"]),
                "den_over_gtsv2": float(den.loc[dev_k] / b["gtsv2_ms"]),
                "floor_serial": float(b["floor_serial_ms"]),
                "floor_overlap": float(b["floor_overlap_ms"]),
                "dev_over_floor": float(dev.loc[dev_k] / b["floor_serial_ms"]),
                "cpu_banded": float(b["cpu_banded_ms"]),
                "worst_residual": float(g["residual"].max()),
                "worst_refdiff": float(np.nanmax(g["ref_reldiff"]))
                if g["ref_reldiff"].notna().any()
                else np.nan,
            }
        )
    return pd.DataFrame(rows).set_index("size")


def provenance(meta: dict, folder: Path) -> str:
    d, bw = meta["device"], meta["bandwidth"]
    return (
        f"{folder}: {d['device_name']} ({d['sm_count']} SMs, CC {d['compute_capability']}), CUDA runtime "
        f"{d['cuda_runtime']}, CuPy {d['cupy_version']}, numpy {meta.get('numpy')}, {meta['date']}\n"
        f"pinned 1 GiB: H2D {bw['h2d_gbs']:.1f} GB/s, D2H {bw['d2h_gbs']:.1f} GB/s, both at once "
        f"{bw['bidir_gbs_total']:.1f} GB/s together; tau {meta['tau_ms'] * 1e3:.2f} us; host stage "
        f"{meta['host_solver']['name']} with {meta['host_solver']['threads']} threads"
    )


def streams_table(t: pd.DataFrame, min_size: int) -> str:
    lines = [
        "| size | raw best k | raw T(1) -> T(best) ms | raw x | fastest-repeat x (k) | host span k=1 / "
        "median of k>1 (ms) | device best k | stage 1+3 spans 1 -> best (ms) | saved ms | denoised x |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n, r in t[t.index >= min_size].iterrows():
        lines.append(
            f"| {_sz(n)}{' *' if r.flag else ''} | {r.raw_k} | {r.raw_1:.3f} -> {r.raw_best:.3f} | "
            f"{r.raw_x:.2f} | {r.fast_x:.2f} ({r.fast_k}) | {r.host1:.2f} / {r.host_med_others:.2f} | "
            f"{r.dev_k} | "
            f"{r.dev_1:.3f} -> {r.dev_best:.3f} | {r.saved_ms:.3f} | {r.den_x:.3f} |"
        )
    return "\n".join(lines)


def baseline_table(t: pd.DataFrame, sizes: list[int] | None = None) -> str:
    lines = [
        "| size | best ms raw (k) | best ms denoised (k) | gtsv2 ms | gtsv2_nopivot ms | raw / gtsv2 | "
        "denoised / gtsv2 | device spans / serial floor | solve_banded (CPU) ms |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n, r in t.iterrows():
        if sizes and n not in sizes:
            continue
        lines.append(
            f"| {_sz(n)} | {r.raw_best:.3f} ({r.raw_k}) | {r.den_best:.3f} ({r.dev_k}) | {r.gtsv2:.3f} | "
            f"{r.gtsv2_nopivot:.3f} | {r.raw_over_gtsv2:.2f} | {r.den_over_gtsv2:.2f} | "
            f"{r.dev_over_floor:.2f} | {r.cpu_banded:.1f} |"
        )
    return "\n".join(lines)


def _span(x: pd.Series, digits: int = 2, median: bool = True) -> str:
    out = f"{x.min():.{digits}f}-{x.max():.{digits}f}"
    return out + (f" (median {x.median():.{digits}f})" if median else "")


def _count(mask: pd.Series) -> str:
    return f"{int(mask.sum())}/{len(mask)}"


def summary(t: pd.DataFrame) -> str:
    big = t[t.index >= 10**6]
    mid = t[(t.index >= 2.5e5) & (t.index < 10**6)]
    small = t[t.index < 2.5e5]
    flagged = [_sz(n) for n in t.index[t["flag"]]]
    return "\n".join(
        [
            f"sizes: {len(t)}; worst residual {t['worst_residual'].max():.1e}; worst difference to the "
            f"numpy reference {np.nanmax(t['worst_refdiff']):.1e} (checked up to 10^7)",
            f"below 2.5e5: raw best k = 1 at {_count(small['raw_k'] == 1)} sizes, device best k = 1 at "
            f"{_count(small['dev_k'] == 1)}",
            f"2.5e5..8e5: raw x {_span(mid['raw_x'], median=False)}, fastest-repeat x "
            f"{_span(mid['fast_x'], median=False)}, denoised x {_span(mid['den_x'], 3, median=False)}",
            f">= 1e6: raw x {_span(big['raw_x'])}, fastest-repeat x {_span(big['fast_x'])}, denoised x "
            f"{_span(big['den_x'], 3)}",
            f">= 1e6: device best k {sorted(set(big['dev_k']))}, raw best k {sorted(set(big['raw_k']))}, "
            f"the same at {_count(big['raw_k'] == big['dev_k'])} sizes; saved ms {_span(big['saved_ms'], 3)}",
            f">= 1e6: device spans at the best k / serial transfer floor {_span(big['dev_over_floor'])}; "
            f"raw best / gtsv2 {_span(big['raw_over_gtsv2'])}; denoised best / gtsv2 "
            f"{_span(big['den_over_gtsv2'])}",
            f"flagged (raw and denoised speed-up differ by more than {FLAG}): {', '.join(flagged) or 'none'}",
        ]
    )


def compare(a: tuple[str, pd.DataFrame, dict], b: tuple[str, pd.DataFrame, dict]) -> str:
    """Side by side per size; the cost of using the other class's best stream count; the ratios >= 10^6."""
    (na, ta, ma), (nb, tb, mb) = a, b
    common = ta.index.intersection(tb.index)
    lines = [
        f"| size | raw best k {na} / {nb} | device best k | raw best ms {na} / {nb} ({nb}/{na}) | device "
        "spans at best k, ms | one-stream host ms | gtsv2 ms |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in common:
        x, y = ta.loc[n], tb.loc[n]

        def pair(col: str, x=x, y=y) -> str:
            return f"{x[col]:.3f} / {y[col]:.3f} ({y[col] / x[col]:.2f})"

        cells = [
            _sz(n),
            f"{x.raw_k} / {y.raw_k}",
            f"{x.dev_k} / {y.dev_k}",
            pair("raw_best"),
            pair("dev_best"),
            pair("host_one_stream"),
            pair("gtsv2"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"| size | denoised best k {na} / {nb} | {na}'s k on {nb}: lost % | {nb}'s k on {na}: lost % |",
        "| ---: | ---: | ---: | ---: |",
    ]
    worst_big = 0.0
    for n in common[common >= 250_000]:
        da, db = ta.loc[n, "den_by_k"], tb.loc[n, "den_by_k"]
        ka, kb = min(da, key=da.get), min(db, key=db.get)
        la, lb = 100 * (db[ka] / db[kb] - 1), 100 * (da[kb] / da[ka] - 1)
        if n >= 10**6:
            worst_big = max(worst_big, la, lb)
        lines.append(f"| {_sz(n)} | {ka} / {kb} | {la:.2f} | {lb:.2f} |")
    big = common[common >= 10**6]

    def ratio(col: str) -> str:
        return _span(tb.loc[big, col] / ta.loc[big, col])

    bwa, bwb = ma["bandwidth"], mb["bandwidth"]
    same_dev = _count(ta.loc[big, "dev_k"] == tb.loc[big, "dev_k"])
    same_raw = _count(ta.loc[big, "raw_k"] == tb.loc[big, "raw_k"])
    lines += [
        "",
        f"- >= 1e6: the other class's denoised best k costs at most {worst_big:.2f}%; same device best k at "
        f"{same_dev} sizes, same raw best k at {same_raw}",
        f"- >= 1e6, {nb} / {na}: raw best {ratio('raw_best')}; device spans at best k {ratio('dev_best')}; "
        f"one-stream host {ratio('host_one_stream')}; gtsv2 {ratio('gtsv2')}",
        f"- copy bandwidth {nb} / {na}: H2D {bwb['h2d_gbs'] / bwa['h2d_gbs']:.3f}, D2H "
        f"{bwb['d2h_gbs'] / bwa['d2h_gbs']:.3f}, both directions "
        f"{bwb['bidir_gbs_total'] / bwa['bidir_gbs_total']:.3f}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "folders", nargs="+", type=Path, help="folders with streams.csv, baselines.csv, meta.json"
    )
    ap.add_argument("--min-size", type=int, default=250_000, help="first size of the streams table")
    args = ap.parse_args(argv)
    done = []
    for folder in args.folders:
        streams, base, meta = load(folder)
        t = per_size(streams, base)
        print(provenance(meta, folder))
        print(summary(t))
        print()
        print(streams_table(t, args.min_size))
        print()
        print(baseline_table(t))
        print()
        done.append((meta["device"]["gpu_class"], t, meta))
    for other in done[1:]:
        print(compare(done[0], other))
    return 0


if __name__ == "__main__":
    sys.exit(main())
