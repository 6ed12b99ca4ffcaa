"""Summarise a ``benchmarks/tridiag_streams.py`` folder (or two, side by side): the tables of
``data/tridiag/<class>/README.md``, computed from the CSVs rather than typed.

    python -m benchmarks.tridiag_summary data/tridiag/h100/streams    # one class
    # each, then the comparison:
    python -m benchmarks.tridiag_summary data/tridiag/h100/streams data/tridiag/h200/streams

Speed-up of the best stream count over one stream, three ways, because stage 2 (the host) jumps between runs
and a slow host stage in the one-stream run inflates the raw figure:
  * raw:       median end-to-end T(1) / min_k median T(k) (what the benchmark prints);
  * fastest:   the fastest of the repeats at k = 1 over the fastest at any k (the host jumps only upwards);
  * denoised:  stage1_span + stage3_span at each k plus the size's one-stream host time, the same for every k
               (``launchtune streams --denoise-host``): streams only act on stages 1 and 3.
``saved ms`` is what the streams take off the device stages (spans at k = 1 minus at the best k), which does
not depend on the host stage at all. A size is flagged (``*``) where the raw speed-up and the denoised one
differ by more than ``FLAG`` (0.10): there the host stage's jumps, not the streams, decide the raw figure.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import run_main

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


# -- folders of the stage-2 benchmark (issue 21: stage 2 on the host or the device, interleaved rounds) ------
def has_stage2(folder: Path) -> bool:
    """A folder written by the stage-2 benchmark (``streams.csv`` with a ``stage2`` column)."""
    return "stage2" in pd.read_csv(folder / "streams.csv", nrows=1).columns


def load_stage2(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, dict]:
    streams = pd.read_csv(folder / "streams.csv")
    base = pd.read_csv(folder / "baselines.csv").set_index("size").sort_index()
    extra = pd.read_csv(folder / "stage2.csv") if (folder / "stage2.csv").is_file() else pd.DataFrame()
    tuning = pd.read_csv(folder / "tuning.csv") if (folder / "tuning.csv").is_file() else pd.DataFrame()
    return streams, base, extra, tuning, json.loads((folder / "meta.json").read_text())


def _ci(r: pd.Series, key: str, digits: int = 3) -> str:
    """``x [lo, hi]``: the median of the per-round ratios and its bootstrap interval."""
    if not np.isfinite(r.get(key, np.nan)):
        return "-"
    return f"{r[key]:.{digits}f} [{r[key + '_lo']:.{digits}f}, {r[key + '_hi']:.{digits}f}]"


def _verdict(lo: pd.Series, hi: pd.Series) -> tuple[int, int, int]:
    """(sizes faster, no measurable difference, slower) of a ratio by its interval against 1."""
    ok = np.isfinite(lo) & np.isfinite(hi)
    return int((hi[ok] < 1).sum()), int(((lo[ok] <= 1) & (hi[ok] >= 1)).sum()), int((lo[ok] > 1).sum())


def stage2_provenance(meta: dict, folder: Path) -> str:
    mem = meta.get("memory", {})
    return provenance(meta, folder) + (
        f"; commit {meta.get('commit') or '?'}; {meta.get('seconds', float('nan')):.0f} s; free device "
        f"memory "
        f"{mem.get('free_bytes', 0) / 1e9:.1f} GB: at most {mem.get('max_unknowns_host_to_host_m10', 0):,} "
        f"unknowns host to host, {mem.get('max_unknowns_resident_m10', 0):,} device-resident (m = 10)"
    )


def stage2_host_table(base: pd.DataFrame, level: str = "90%") -> str:
    lines = [
        f"| size | best k | T(1) -> T(best) ms | x over 1 stream [{level}] | best / serial floor | best / "
        f"copy floor [{level}] | best / gtsv2 [{level}] | host stage 2: best ms (k) "
        "| device / host stage 2 |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n, r in base.iterrows():
        lines.append(
            f"| {_sz(n)} | {int(r.gpu_best_streams)} | {r.gpu_one_stream_ms:.3f} -> {r.gpu_best_ms:.3f} | "
            f"{_ci(r, 'gpu_speedup')} | {r.gpu_over_floor:.3f} | {_ci(r, 'gpu_over_copy')} | "
            f"{_ci(r, 'gpu_over_gtsv2')} | {r.host_best_ms:.3f} ({int(r.host_best_streams)}) | "
            f"{r.gpu_best_ms / r.host_best_ms:.3f} |"
        )
    return "\n".join(lines)


def stage2_device_table(base: pd.DataFrame, level: str = "90%") -> str:
    lines = [
        f"| size | ours ms | gtsv2 ms | gtsv2_nopivot ms | ours / gtsv2_nopivot [{level}] | residual ours / "
        "gtsv2 / "
        "nopivot |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n, r in base.iterrows():
        res = " / ".join(
            f"{r.get(k, np.nan):.1e}"
            for k in ("dev_ours_residual", "dev_gtsv2_residual", "dev_gtsv2_nopivot_residual")
        )
        lines.append(
            f"| {_sz(n)} | {r.dev_ours_ms:.3f} | {r.dev_gtsv2_ms:.3f} | {r.dev_gtsv2_nopivot_ms:.3f} | "
            f"{_ci(r, 'dev_over_nopivot')} | {res} |"
        )
    return "\n".join(lines)


def stage2_facts(streams: pd.DataFrame, base: pd.DataFrame, level: str = "90%") -> str:
    big, small = base[base.index >= 10**6], base[base.index < 10**6]
    res_cols = [c for c in base.columns if c.endswith("_residual")]
    worst = max(float(streams["residual"].max()), float(np.nanmax(base[res_cols].to_numpy())))
    g_f, g_n, g_s = _verdict(small["gpu_over_gtsv2_lo"], small["gpu_over_gtsv2_hi"])
    b_f, b_n, b_s = _verdict(big["gpu_over_gtsv2_lo"], big["gpu_over_gtsv2_hi"])
    d_f, d_n, d_s = _verdict(big["dev_over_nopivot_lo"], big["dev_over_nopivot_hi"])
    sp = base["gpu_speedup_lo"] > 1
    wins = ", ".join(
        f"{_sz(n)}: {r.gpu_speedup:.3f}x, k={int(r.gpu_best_streams)}" for n, r in base[sp].iterrows()
    )
    return "\n".join(
        [
            f"- correctness: {len(streams)} (size, stage2, streams) points and every baseline, worst "
            f"residual "
            f"{worst:.1e}; worst relative difference to the numpy reference "
            f"{streams['ref_reldiff'].max():.1e} "
            "(compared up to 10^6)",
            f"- host to host, >= 10^6, stage 2 on the device at the best k: "
            f"{_span(big['gpu_over_floor'], 3)} x "
            f"the serial transfer floor (within 1.05x at {_count(big['gpu_over_floor'] <= 1.05)} sizes), "
            f"{_span(big['gpu_over_copy'], 3)} x the same copies timed in the run",
            f"- against gtsv2 with the same transfers (per-round ratio, {level} interval): >= 10^6 "
            f"{_span(big['gpu_over_gtsv2'], 3)}, faster at {b_f}, no measurable difference at {b_n}, "
            f"slower at "
            f"{b_s} of {b_f + b_n + b_s} sizes (gtsv2 cannot do 10^8); < 10^6 "
            f"{_span(small['gpu_over_gtsv2'], 3)}, "
            f"faster at {g_f}, no measurable difference at {g_n}, slower at {g_s} of {len(small)}",
            f"- device resident, >= 10^6, ours / gtsv2_nopivot {_span(big['dev_over_nopivot'], 3)}: "
            f"faster at "
            f"{d_f}, no measurable difference at {d_n}, slower at {d_s} of {len(big)}",
            f"- stage 2 on the device against the seed's host stage 2 (best k each): "
            f"{_span(base['gpu_best_ms'] / base['host_best_ms'], 3)} x the time",
            f"- streams (stage 2 on the device): best k = 1 at {_count(base['gpu_best_streams'] == 1)} "
            f"sizes; "
            f"the best k beats one stream with the {level} interval above 1 at {_count(sp)} sizes "
            f"({wins or 'none'})",
        ]
    )


def stage2_extras(extra: pd.DataFrame, tuning: pd.DataFrame) -> str:
    lines = []
    if not extra.empty:
        alone = extra[extra["kind"] == "stage2_alone"]
        for _, r in alone.iterrows():
            lines.append(
                f"- stage 2 alone at {_sz(int(r['size']))} ({int(r.iface_unknowns):,} interface "
                f"unknowns, levels "
                f"{r.levels}): ours {r.ours_ms:.4f} ms, gtsv2_nopivot {r.gtsv2_nopivot_ms:.4f} ms, ratio "
                f"{r.ratio:.3f} [{r.ratio_lo:.3f}, {r.ratio_hi:.3f}], relative difference {r.reldiff:.1e}"
            )
        for _, r in extra[extra["kind"] == "beyond"].iterrows():
            lines.append(
                f"- {_sz(int(r['size']))} unknowns, k = {int(r.streams)}: {r.ours_ms:.2f} ms = "
                f"{r.ratio:.3f} x the "
                f"serial floor ({r.floor_serial_ms:.2f} ms), residual {r.residual:.1e}"
            )
    if not tuning.empty:
        for n, g in tuning.groupby("size"):
            g = g[g["error"].isna() | (g["error"] == "")]
            best = g.loc[g["total_ms"].idxmin()]
            ref = g[(g["m"] == 10) & (g["streams"] == 1) & (g["threads"] == 256)]["total_ms"]
            lines.append(
                f"- tuning at {_sz(int(n))} (medians of 5): best m = {int(best.m)}, k = {int(best.streams)}, "
                f"threads = {int(best.threads)}: {best.total_ms:.3f} ms against {float(ref.iloc[0]):.3f} "
                f"ms at "
                f"m = 10, k = 1, 256 threads; spread of all {len(g)} points "
                f"{g['total_ms'].max() / g['total_ms'].min():.3f}x"
            )
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
        if has_stage2(folder):
            streams, base, extra, tuning, meta = load_stage2(folder)
            # folders measured before the intervals moved to kernels.compare (95%) hold 90% intervals
            level = f"{round(100 * meta.get('confidence', 0.90))}%"
            print(stage2_provenance(meta, folder))
            print(stage2_facts(streams, base, level))
            print()
            print(stage2_host_table(base, level))
            print()
            print(stage2_device_table(base, level))
            print()
            print(stage2_extras(extra, tuning))
            continue
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
    run_main(main)
