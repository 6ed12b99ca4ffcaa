"""The generated blocks of the README and docs (``python -m tools.readme``): each a function of the repository
root that reads committed files under ``data/`` and returns Markdown, named in :data:`BLOCKS`.

Adding a block: write ``def _my_table(root: Path) -> str``, add ``"my_table": _my_table`` to ``BLOCKS``, put
the two marker lines where it belongs (``tools/readme.py`` says how), and run ``python -m tools.readme``.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds


class ReadmeError(ValueError):
    """A generated block that cannot be rendered: unknown name, unbalanced markers, missing data."""


# ---------------------------------------------------------------- formatting


def _g(x: float) -> str:
    """A ratio or R2 as the README prints it: three decimals, one past +-10."""
    return f"{x:.3f}" if abs(x) < 10 else f"{x:.1f}"


def _pct(x: float) -> str:
    return f"{100 * x:.2g}%" if x < 0.01 else f"{100 * x:.1f}%"


def _span(values: list[int]) -> str:
    return f"{values[0]}" if values[0] == values[-1] else f"{values[0]}-{values[-1]}"


def _paragraph(text: str) -> str:
    """A generated sentence wrapped at the README's line width."""
    return textwrap.fill(text, width=110, break_on_hyphens=False) + "\n"


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ReadmeError(f"{path}: missing (a generated block reads it)") from exc


# ---------------------------------------------------------------- the blocks


def file_block(relpath: str, tables_only: bool = False) -> Callable[[Path], str]:
    """A block that is a committed Markdown file, copied in whole (``tables_only``: from its first table on,
    the lines before it being the benchmark's notes on its own run)."""

    def render(root: Path) -> str:
        path = root / relpath
        if not path.exists():
            raise ReadmeError(f"{path}: missing (a generated block reads it)")
        text = path.read_text()
        if tables_only and "\n|" in text:
            text = text[text.index("\n|") + 1 :]
        return text.strip() + "\n"

    return render


def _sweep_row_figures(folder: Path, gpu_class: str) -> dict[str, Any]:
    """The figures of one paper-sized sweep folder: throughput, default, best and median, R2, validation."""
    report = _load(folder / "report.json")
    cls = report["classes"][gpu_class]
    validation = _load(folder / "validation.json")[gpu_class]
    table = ds.dataset(folder / "merged", partitioning="hive").to_table(
        columns=["total_ms", "status", "sampler"]
    )
    frame = table.to_pandas()
    random_ok = frame[(frame["status"] == "ok") & (frame["sampler"] == "random")]["total_ms"]
    default = cls["default_measured_ms"]
    return {
        "device": cls["device_name"],
        "rows": cls["samples"],
        "ok": cls["ok"],
        "seconds": report["throughput"]["seconds"],
        "per_minute": report["throughput"]["samples_per_minute"],
        "random": len(random_ok),
        "copy_gbs": validation["device"]["measured_bandwidth_gbs"],
        "default_ms": default,
        "best_over_default": float(random_ok.min()) / default,
        "median_over_default": float(random_ok.median()) / default,
        "r2_mlp": cls["models"]["mlp"]["r2_test"],
        "r2_gbr": cls["models"]["gbr"]["r2_test"],
        "r2_additive": cls["models"]["additive"]["r2_test"],
        "picked_over_default": cls["predicted_best_measured_ms"] / default,
        "picked_is_default": cls["predicted_best_config"] == cls["default_config"],
        "comparison": validation.get("comparison"),
    }


def _cfd_sweeps(root: Path) -> str:
    """The paper-sized H100 and H200 sweeps side by side (data/cfd/<class>/sweep_paper)."""
    classes = ("h100", "h200")
    f = {c: _sweep_row_figures(root / "data" / "cfd" / c / "sweep_paper", c) for c in classes}

    def row(label: str, cell: Callable[[dict], str]) -> str:
        return f"| {label} | " + " | ".join(cell(f[c]) for c in classes) + " |"

    def picked(x: dict) -> str:
        # two timings of one configuration differ by noise only: no ratio for a pick that is the default
        if x["picked_is_default"]:
            return "the default itself"
        c = x["comparison"]
        if c:
            return f"another: {c['ratio']:.3f}x [{c['low']:.3f}, {c['high']:.3f}], {c['verdict']}"
        return f"another: {x['picked_over_default']:.3f}x (one timing each, no interval)"

    lines = [
        "| | " + " | ".join(f[c]["device"] for c in classes) + " |",
        "| --- |" + " ---: |" * len(classes),
        row("configurations measured (ok)", lambda x: f"{x['rows']:,} ({x['ok']:,}) in {x['seconds']:.0f} s"),
        row(
            "samples per minute (10,000 samples take)",
            lambda x: f"{x['per_minute']:,.0f} ({10000 / x['per_minute']:.1f} min)",
        ),
        row("copy bandwidth measured by the worker", lambda x: f"{x['copy_gbs']:,.0f} GB/s"),
        row(
            "default launch (one thread per cell, 256 threads), re-measured",
            lambda x: f"{x['default_ms']:.3f} ms/step",
        ),
        row(
            "best / median of the random samples, over the default",
            lambda x: (
                f"{x['best_over_default']:.3f}x / {x['median_over_default']:.2f}x ({x['random']:,} samples)"
            ),
        ),
        row(
            "MLP (Table 2) / gradient boosting / additive R2, test split",
            lambda x: f"{_g(x['r2_mlp'])} / {_g(x['r2_gbr'])} / {_g(x['r2_additive'])}",
        ),
        row("model's predicted best (time over the default's, 95% interval)", picked),
    ]
    return "\n".join(lines) + "\n"


def _combined(root: Path) -> str:
    """Per-class vs combined R2 and leave-one-class-out (``models/metrics.json`` of the combined folder)."""
    metrics = _load(root / "data" / "cfd" / "combined" / "sweep_paper" / "models" / "metrics.json")
    lines = [
        "| class | test rows | MLP R2 per-class | MLP R2 combined | GBR R2 per-class | GBR R2 combined |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for cls, c in metrics["comparison"].items():
        per, comb = c["per_class"], c["combined"]
        lines.append(
            f"| {cls} | {c['n_test']:,} | {_g(per['mlp']['r2'])} | {_g(comb['mlp']['r2'])} "
            f"| {_g(per['gbr']['r2'])} | {_g(comb['gbr']['r2'])} |"
        )
    lines += [
        "",
        "| held out | trained on | model | R2 | Spearman rho | predicted-best row / measured best "
        "| median / best |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for held, entry in metrics["loco"].items():
        for model, m in entry["models"].items():
            if model != "gbr":
                continue
            lines.append(
                f"| {held} | {', '.join(entry['trained_on'])} | {model} | {_g(m['r2_test'])} "
                f"| {_g(m['spearman'])} | {m['picked_over_best']:.3f} | {m['median_over_best']:.3f} |"
            )
    return "\n".join(lines) + "\n"


def _autotune(root: Path) -> str:
    """The runtime autotuner on the H200 (``results.json`` of ``benchmarks.autotune_runtime``)."""
    r = _load(root / "data" / "cfd" / "h200" / "autotune" / "results.json")
    kernels = r["per_kernel"]

    def steps(mode: str) -> list[int]:
        return sorted({k[mode]["first_scan_steps"] for k in kernels.values()})

    def share(mode: str) -> float:
        # launches at non-optimal parameters, weighted by kernel time: the run's summary share per kernel,
        # averaged over kernels weighted by each kernel's time at the default
        total = sum(k["default_ms"] for k in kernels.values())
        return sum(k[mode]["nonoptimal_share"] * k["default_ms"] for k in kernels.values()) / total

    def found(mode: str) -> int:
        return sum(k[mode]["over_best"] == 1.0 for k in kernels.values())

    bitwise = "is" if all(r["bitwise_equal_to_off"].values()) else "is NOT"
    n = len(kernels)
    return _paragraph(
        f"Measured on the {r['device']['device_name']} ({r['size']} inlet, {r['steps_per_run']:,} steps "
        f"a run): `seeded` finished tuning in {_span(steps('seeded'))} steps against "
        f"`scan`'s {_span(steps('scan'))} and spent about {_pct(share('seeded'))} of the kernel time "
        f"at non-optimal parameters (`scan`: {_pct(share('scan'))}; a full scan is "
        f"{r['exhaustive_pairs']} candidates per kernel). `seeded` locked the exhaustive per-kernel best "
        f"on {found('seeded')} of {n} kernels, `scan` on {found('scan')}. Every tuned run's final state "
        f"{bitwise} bitwise the untuned run's."
    )


def _scaling_runs(root: Path) -> list[tuple[str, dict]]:
    """Every committed scaling run (``data/*/*/multi_gpu_scaling/scaling.json``), fewest cards first."""
    found = sorted(root.glob("data/*/*/multi_gpu_scaling/scaling.json"))
    if not found:
        raise ReadmeError(
            f"{root / 'data'}: no */*/multi_gpu_scaling/scaling.json (a generated block reads it)"
        )
    runs = [(p.parent.relative_to(root).as_posix(), _load(p)) for p in found]
    return sorted(runs, key=lambda r: (r[1]["runs"][1]["cards"], r[0]))


def _card_name(many: dict) -> str:
    """The cards' model as the table prints it: ``H100``, ``H200`` (from the first worker's device name)."""
    worker = next(iter(many["timing"]["per_worker"].values()))
    words = str(worker.get("device_name", worker["gpu_class"])).replace("NVIDIA ", "").split()
    return words[0] if words else str(worker["gpu_class"])


def _multi_gpu_table(root: Path) -> str:
    """One row per committed scaling run: 1 card against N cards of one host, and the cards' agreement."""
    lines = [
        "| host | configurations (1 card / N) | per second, 1 card | per second, N cards | speed-up "
        "| efficiency | cards finish within | card / card, median | data |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    runs = _scaling_runs(root)
    for folder, s in runs:
        one, many = s["runs"][0], s["runs"][1]
        n = many["cards"]
        rows_one = f"{one['timing']['rows']:,}" + ("\\*" if one["timing"].get("stopped_early") else "")
        ratios = sorted(b["median"] for b in s["agreement"]["between"].values())
        agree = f"{ratios[0]:.4f}" + (f" to {ratios[-1]:.4f}" if len(ratios) > 1 else "")
        spread = max(many["timing"]["finish_spread_s"].values())
        lines.append(
            f"| {n} x {_card_name(many)} | {rows_one} / {many['timing']['rows']:,} "
            f"| {s['scaling']['samples_per_s_1']:.2f} | {s['scaling'][f'samples_per_s_{n}']:.2f} "
            f"| {s['scaling']['speedup']:.2f}x | {s['scaling']['efficiency']:.1%} | {spread:.2f} s "
            f"| {agree} | `{folder}/` |"
        )
    if any(s["runs"][0]["timing"].get("stopped_early") for _, s in runs):
        lines += [
            "",
            "\\* the one-card run reached its time limit first; its rate is over the configurations it "
            "measured.",
        ]
    return "\n".join(lines) + "\n"


def _multi_gpu_summary(root: Path) -> str:
    """One sentence for the README: the speed-up on each committed host."""
    parts = [
        f"{s['scaling']['speedup']:.2f}x on {s['runs'][1]['cards']} {_card_name(s['runs'][1])}s"
        for _, s in _scaling_runs(root)
    ]
    return _paragraph(
        f"Measured with the paper-sized CFD sweep: {', '.join(parts)} of one host against one card "
        f"([docs/multi_gpu.md](docs/multi_gpu.md))."
    )


def _autotune_fused(root: Path) -> str:
    """The run-time tuner over the fused space on the H100 (data/cfd/h100/autotune_fused/results.json)."""
    r = _load(root / "data" / "cfd" / "h100" / "autotune_fused" / "results.json")
    runs, comp = r["runs"], r["comparisons"]

    def c(name: str) -> str:
        x = comp[name]
        return f"{x['ratio']:.3f}x [{x['low']:.3f}, {x['high']:.3f}] ({x['verdict']})"

    seeded, scan = runs["seeded"]["summary"], runs["scan"]["summary"]
    bitwise = "bitwise" if all(r["bitwise_equal"].values()) else "NOT bitwise"
    return _paragraph(
        f"Measured on the {r['device']['device_name']} ({r['size']} inlet, {runs['off']['steps']} steps "
        f"a run, `data/cfd/h100/autotune_fused/`): seeded from the fused sweep's table, "
        f"the tuner locked after {seeded['tuned_at_step']} steps over {seeded['candidates']} candidates; "
        f"its pick takes {c('seeded / default')} the seven-kernel default's step time and "
        f"{c('seeded / sweep best')} the sweep's best row's (95% intervals, "
        f"{comp['seeded / default']['rounds']} interleaved rounds). A scan of "
        f"{scan['candidates']} drawn configurations locked after {scan['tuned_at_step']} steps at "
        f"{c('scan / default')} the default. Every fused variant compiled before the first step "
        f"({r['compile_ms']:.0f} ms); the tuned runs' final states are {bitwise} the untuned run's."
    )


def _intervals_block(folder: str) -> Callable[[Path], str]:
    """The block of ``_strategies_intervals`` for the ``--compare`` run in ``folder`` (its runs.csv.gz)."""
    return lambda root: _strategies_intervals(root / folder / "runs.csv.gz")


def _strategies_intervals(runs_file: Path) -> str:
    """Our best strategy against Kernel Tuner's per budget: ratio of means, 95% interval (runs.csv.gz)."""
    import pandas as pd

    from launchtune.pipeline.strategies.uncertainty import head_to_head_intervals

    runs = pd.read_csv(runs_file)
    table = head_to_head_intervals(runs)
    lines = [
        "| budget | ours | Kernel Tuner | ours / Kernel Tuner, mean picked/optimum [95%] | verdict |",
        "| ---: | --- | --- | --- | --- |",
    ]
    for r in table.to_dict("records"):
        lines.append(
            f"| {r['budget']} | {r['ours']} | {r['Kernel Tuner']} | {r['ratio']:.3f} "
            f"[{r['low']:.3f}, {r['high']:.3f}] | {r['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def _cfd_fused_pick(root: Path) -> str:
    """The fused sweeps' re-measured pick per class (``validation.json``, ``pick_vs_best_row.json``)."""
    sentences = []
    for gpu in ("h100", "h200"):
        folder = root / "data" / "cfd" / gpu / "sweep_fused"
        v = _load(folder / "validation.json")[gpu]
        best = _load(folder / "pick_vs_best_row.json")
        ran = v["candidates"]
        fresh = [c for c in ran if not c.get("recorded")]
        model_best = min(c["total_ms"] for c in fresh) / best["best_row"]["recorded_ms"] if fresh else None
        pick, vs = ran[0], best["comparison"]
        what = "a row the sweep recorded" if pick.get("recorded") else "a configuration of the fresh pool"
        recorded = sum(bool(c.get("recorded")) for c in ran)
        c = v["comparison"]
        sentences.append(
            f"{gpu.upper()}: the pick is {what} ({len(ran)} re-measured, {recorded} of them recorded rows), "
            f"{_g(c['ratio'])}x [{_g(c['low'])}, {_g(c['high'])}] the default's step time and "
            f"{_g(vs['ratio'])}x [{_g(vs['low'])}, {_g(vs['high'])}] the best recorded row's "
            f"({vs['verdict']}); the model's best fresh candidate ran "
            + (f"{_g(model_best)}x the best row's recorded time" if model_best else "nothing")
        )
    return _paragraph("; ".join(sentences) + ".")


def _cfd_stage_tuning(root: Path) -> str:
    """The stage kernel after the latest round of tuning (``lab/cfd_arith.py``'s newest committed run)
    and each card's sweep of the space with ``tile.arith`` (``data/cfd/<card>/sweep_fused_arith``)."""
    run = _load(root / "data/cfd/h100/stage_tuning/cb10d31/results_arith.json")
    ratios = {r["b"]: r for r in run["ratios"] if r["a"] == "default"}
    nx, ny = run["size"]
    lines = [
        f"{run['device']['device_name']}, {nx}x{ny} inlet, {run['rounds']} interleaved rounds, copy "
        f"{run['copy_gbs']:,.0f} GB/s (`data/cfd/h100/stage_tuning/cb10d31/`):",
        "",
        "| configuration | ms/step | vs the seven-kernel default [95%] | % of copy | after 100 steps |",
        "| --- | ---: | --- | ---: | --- |",
    ]
    for name, ms in run["median_ms_per_step"].items():
        r = ratios.get(name)
        vs = f"{r['ratio']:.3f}x [{r['low']:.3f}, {r['high']:.3f}]" if r else "(the baseline)"
        agree = run["agreement_after_100_steps"].get(name, {"bitwise": True, "rel_diff_per_variable": [0.0]})
        how = "bitwise" if agree["bitwise"] else f"within {max(agree['rel_diff_per_variable']):.1e}"
        lines.append(f"| {name} | {ms:.3f} | {vs} | {100 * run['fraction_of_copy'][name]:.0f} | {how} |")
    parts = []
    for gpu in ("h100", "h200"):
        folder = root / "data/cfd" / gpu / "sweep_fused_arith"
        v = _load(folder / "validation.json")[gpu]
        pick, c = v["candidates"][0], v["comparison"]
        rows = [x["total_ms"] for x in v["candidates"] if x.get("recorded")]
        merged = _load(folder / "report.json")["merged_rows"]
        parts.append(
            f"{gpu.upper()} ({merged:,} rows): the pipeline's pick takes {_g(c['ratio'])}x [{_g(c['low'])}, "
            f"{_g(c['high'])}] the default's step time ({c['verdict']}, {c['rounds']} interleaved rounds), "
            f"{_g(pick['total_ms'] / min(rows))}x the fastest of the sweep's best rows re-measured beside it"
        )
    sentence = "The sweeps of the space with these kernels, " + "; ".join(parts) + "."
    lines += ["", _paragraph(sentence).rstrip("\n")]
    return "\n".join(lines) + "\n"


def _cfd_cross_card(root: Path) -> str:
    """Does the best fused configuration differ between the H100 and the H200, and what does one card's best
    cost on the other? From the two sweeps of the space with ``tile.arith`` (the same 6,000 configurations and
    kernels, one recorded time each)."""
    from scipy.stats import spearmanr

    def rows(gpu: str) -> Any:
        folder = root / "data" / "cfd" / gpu / "sweep_fused_arith"
        params = _load(folder / "plan" / f"{gpu}.json")["params"]
        frame = ds.dataset(folder / "merged", partitioning="hive").to_table().to_pandas()
        return frame[frame["status"] == "ok"].set_index("sample_id"), params

    (a, params), (b, _) = rows("h100"), rows("h200")
    both = a.merge(b[["total_ms", *params]], left_index=True, right_index=True, suffixes=("", "_h200"))
    same = (both[params].to_numpy() == both[[f"{p}_h200" for p in params]].to_numpy()).all(axis=1)
    both = both[same]
    ta, tb = both["total_ms"], both["total_ms_h200"]

    def tile(i: Any) -> str:
        r = both.loc[i]
        block, cells = f"{r['tile.block_x']}x{r['tile.block_y']}", f"{r['tile.cells_x']}x{r['tile.cells_y']}"
        flags = ", ".join(f"{k} {r[f'tile.{k}']}" for k in ("smem", "faces", "maxreg", "arith"))
        return f"block {block}, cells {cells}, {flags}"

    best_a, best_b = ta.idxmin(), tb.idxmin()
    stage = both["fusion"] == 2
    lines = [
        "| | H100 | H200 |",
        "| --- | --- | --- |",
        f"| best recorded row | {tile(best_a)}: {ta[best_a]:.3f} ms | {tile(best_b)}: {tb[best_b]:.3f} ms |",
        f"| the other card's best row, recorded time over the best | {ta[best_b] / ta[best_a]:.3f} "
        f"| {tb[best_a] / tb[best_b]:.3f} |",
        f"| rows within 3% of the best | {int((ta <= 1.03 * ta.min()).sum())} "
        f"| {int((tb <= 1.03 * tb.min()).sum())} |",
    ]
    rho, rho_stage = spearmanr(ta, tb).statistic, spearmanr(ta[stage], tb[stage]).statistic
    sentence = (
        ("The best configuration is the same on both cards. " if best_a == best_b else "")
        + f"Over the {len(both):,} configurations both cards measured, Spearman's rho of the two cards' "
        f"times is {_g(rho)} ({_g(rho_stage)} within the stage level). Data: "
        "`data/cfd/{h100,h200}/sweep_fused_arith/`."
    )
    return "\n".join(lines) + "\n\n" + _paragraph(sentence)


def _tridiag_host_to_host(root: Path) -> str:
    """Host to host with stage 2 by SPIKE slices against the serial transfer floor, the previous pipeline
    and cuSPARSE gtsv2, per class (``data/tridiag/<class>/streamed/ratios.csv``, ``tridiag_streamed``)."""
    import csv

    lines = [
        "| GPU | unknowns | before: best ordered / serial floor | spike, best k | ms | / serial floor [95%] "
        "| / copies of the same rounds [95%] | / gtsv2, same transfers [95%] | best k / k = 1 [95%] |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    met: dict[str, list[tuple[int, float]]] = {}
    faster: dict[str, list[bool]] = {}
    one_copy: dict[str, str] = {}  # at the smallest size: one plain copy in and out against the serial floor
    for gpu in ("h100", "h200"):
        folder = root / "data" / "tridiag" / gpu / "streamed"
        with (folder / "ratios.csv").open() as fh:
            rows = list(csv.DictReader(fh))
        with (folder / "repeats.csv").open() as fh:
            repeats = list(csv.DictReader(fh))
        name = _load(folder / "meta.json")["device"]["device_name"].replace("NVIDIA ", "")
        smallest = min(int(r["size"]) for r in rows)
        one_copy[name] = f"{_paired(repeats, smallest, 'serial_floor', 'floor_copy')} at {smallest:,}"
        for size in sorted({int(r["size"]) for r in rows}):
            at = [r for r in rows if int(r["size"]) == size]
            on_floor = {r["b"]: r for r in at if r["a"] == "floor_copy"}
            before = min((r for b, r in on_floor.items() if b.startswith("ordered_plain_")), key=_ms)
            spike = min((r for b, r in on_floor.items() if b.rsplit("_", 1)[0] == "spike"), key=_ms)
            vs = next(r for r in at if r["a"] == "gtsv2" and r["b"] == spike["b"])
            streams = _paired(repeats, size, "spike_1", spike["b"])
            met.setdefault(name, []).append((size, float(spike["floor_high"])))
            faster.setdefault(name, []).append(vs["verdict"] == "faster")
            lines.append(
                f"| {name} | {size:,} | {float(before['b_over_serial_floor']):.3f} | "
                f"{spike['b'].rsplit('_', 1)[1]} | {float(spike['b_ms']):.3f} | "
                f"**{float(spike['b_over_serial_floor']):.3f}** [{float(spike['floor_low']):.3f}, "
                f"{float(spike['floor_high']):.3f}] | {_interval(spike)} | {_interval(vs)} | "
                f"{streams} |"
            )
    verdicts = []
    for name, pts in met.items():
        above = [f"{size:,}" for size, high in pts if high > 1.05]  # high: the interval's upper end
        within = [size for size, high in pts if high <= 1.05]
        verdicts.append(
            f"{name}: within 1.05x of the serial floor (whole interval) at {len(within)} of {len(pts)} sizes"
            + (f"; above it at {', '.join(above)}" if above else "")
            + f"; faster than gtsv2 at {sum(faster[name])} of {len(pts)}"
            + f"; one plain copy in and out: {one_copy[name]} unknowns"
        )
    ncu = _kernel_times(root / "data" / "tridiag" / "h100" / "streamed" / "ncu_kernels_1e6.csv")
    times = ", ".join(f"`{k}` {v:.1f} us" for k, v in ncu.items())
    text = "; ".join(verdicts) + (
        f". The three kernels between the last upload and the first download, at 10^6 unknowns on the H100 "
        f"(Nsight Compute, median of the solve's launches): {times}. "
    )
    newest = "data/tridiag/h100/streamed/staged_3ef7b0a"  # the newest end-chunk run: staged way back
    return "\n".join(lines) + "\n\n" + _paragraph(text + _end_chunks(root, newest))


def _tridiag_spike_models(root: Path) -> str:
    """The stream-count models refitted on the SPIKE pipeline (``data/tridiag/h100/streams_spike``): how often
    each picks the measured best chunk count, and the best count's speed-up over one chunk at a few sizes."""
    import csv

    from launchtune.pipeline.streams.model import evaluate, load_dataset

    folder = root / "data" / "tridiag" / "h100" / "streams_spike"
    meta = _load(folder / "meta.json")
    result = evaluate(load_dataset(folder / "streams.csv", copies="spike"), tau_ms=meta["tau_ms"], seed=0)
    s, n = result["summary"], result["summary"]["sizes"]
    with (folder / "baselines.csv").open() as fh:
        base = {int(r["size"]): r for r in csv.DictReader(fh)}
    speedups = "; ".join(
        f"{size:,}: {float(r['gpu_speedup']):.3f} [{float(r['gpu_speedup_lo']):.3f}, "
        f"{float(r['gpu_speedup_hi']):.3f}] with k={r['gpu_best_streams']}"
        + ("" if float(r["gpu_speedup_lo"]) > 1 else " (no measurable difference)")
        for size, r in sorted(base.items())
        if size in (10**6, 10**7, 10**8)
    )
    name = meta["device"]["device_name"].replace("NVIDIA ", "")
    test = s["ours_test_sizes"]
    return _paragraph(
        f"The seed's stream-count models refitted on the SPIKE pipeline ({name}, "
        f"`data/tridiag/h100/streams_spike`, {n} sizes from {min(base):,} to {max(base):,} unknowns, chunk "
        f"counts 1-32): the seed's model picks the measured best count at {s['seed_model']['exact']} of {n} "
        f"sizes (within 2% of the best time at {s['seed_model']['within_2pct']}), ours at "
        f"{s['ours_all']['exact']} ({s['ours_all']['within_2pct']}; on its held-out sizes {test['exact']} "
        f"and {test['within_2pct']} of {test['of']}), Gomez-Luna's sqrt(sum / tau) at "
        f"{s['gomez_luna_exact']}. "
        f"The best count over one chunk (median of per-round ratios, 95% interval): {speedups}."
    )


def _end_chunks(root: Path, where: str) -> str:
    """One sentence from ``tridiag_streamed --ends``: per size, the best small-end-chunk SPIKE configuration
    over the best equal-chunk one, and over the serial floor of the same rounds."""
    import csv

    folder = root / where
    with (folder / "ratios.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["b"].startswith("spike_e") and r["a"].startswith("spike_")]
    parts = []
    for size in sorted({int(r["size"]) for r in rows}):
        r = min((r for r in rows if int(r["size"]) == size), key=_ms)
        parts.append(
            f"{size:,}: {_interval(r)}, {float(r['b_over_serial_floor']):.3f} [{float(r['floor_low']):.3f}, "
            f"{float(r['floor_high']):.3f}] of the floor"
        )
    name = _load(folder / "meta.json")["device"]["device_name"].replace("NVIDIA ", "")
    return (
        f"Small end chunks (`ends`, {name}, `{where}`), the best "
        f"over the best equal chunks of the same rounds: " + "; ".join(parts) + "."
    )


def _kernel_times(path: Path) -> dict[str, float]:
    """Median ``gpu__time_duration`` in microseconds of the spike kernels in an ``ncu --csv`` listing (the
    spike solve's launches come first; ``pcr_small`` before the first ``spike_back`` is its top system's)."""
    import csv
    import statistics

    with path.open() as fh:
        rows = [r for r in csv.DictReader(line for line in fh if not line.startswith("==PROF=="))]
    out: dict[str, list[float]] = {}
    seen_back = False
    for r in rows:
        name = r["Kernel Name"]
        if name == "spike_back":
            seen_back = True
        if name in ("spike_reduce", "spike_back") or (name == "pcr_small" and not seen_back):
            out.setdefault(name, []).append(float(r["Metric Value"].replace(",", "")) / 1000)
    return {k: statistics.median(v) for k, v in out.items()}


def _paired(repeats: list[dict], size: int, a: str, b: str) -> str:
    """B / A of two configurations' per-round times at one size (``kernels.compare``), as printed."""
    from launchtune.kernels.compare import compare

    def times(config: str) -> list[float]:
        picked = [r for r in repeats if int(r["size"]) == size and r["config"] == config]
        return [float(r["ms"]) for r in sorted(picked, key=lambda r: int(r["round"]))]

    c = compare(times(a), times(b), seed=size % 100_003)
    return f"{c.ratio:.3f} [{c.low:.3f}, {c.high:.3f}]"


def _ms(row: dict) -> float:
    return float(row["b_ms"])


def _interval(row: dict) -> str:
    return f"{float(row['ratio']):.3f} [{float(row['low']):.3f}, {float(row['high']):.3f}]"


def _summary(root: Path) -> str:
    """The README's few headline figures, each with the page that has the whole measurement."""
    sweeps = {c: _sweep_row_figures(root / "data" / "cfd" / c / "sweep_paper", c) for c in ("h100", "h200")}
    defaults = all(f["picked_is_default"] for f in sweeps.values())
    fused = {}
    for gpu in ("h100", "h200"):
        c = _load(root / "data/cfd" / gpu / "sweep_fused_arith" / "validation.json")[gpu]["comparison"]
        fused[gpu] = f"{_g(c['ratio'])}x [{_g(c['low'])}, {_g(c['high'])}]"
    at = _load(root / "data" / "cfd" / "h200" / "autotune" / "results.json")
    kernels = at["per_kernel"].values()
    steps = {m: _span(sorted({k[m]["first_scan_steps"] for k in kernels})) for m in ("seeded", "scan")}
    tri = _tridiag_at(root, "h100", 10_000_000)
    conv = _kernel_convolution_figures(root)
    lines = [
        "| what | measured | the whole measurement |",
        "| --- | --- | --- |",
        "| the CFD step's seven kernels over the paper's launch space (10,840 configurations each on an H100 "
        "and an H200) | "
        + (
            "the default launch (one thread per cell) is fastest on both cards; the model picks it"
            if defaults
            else "the model's pick differs from the default launch"
        )
        + f"; the best random sample takes {sweeps['h100']['best_over_default']:.3f}x (H100) and "
        f"{sweeps['h200']['best_over_default']:.3f}x (H200) the default's time "
        "| [docs/results.md](docs/results.md) |",
        "| the fused CFD space (fusion, 2-D tiles, shared memory, register cap, arithmetic) "
        f"| the pipeline's pick takes {fused['h100']} the default step's time on the H100, "
        f"{fused['h200']} on the H200 (95% intervals) | [docs/cfd.md](docs/cfd.md) |",
        f"| the runtime tuner, seeded from a sweep's table (H200) | done tuning in {steps['seeded']} steps "
        f"against {steps['scan']} for a full scan | [docs/autotune.md](docs/autotune.md) |",
        f"| the tridiagonal solver host to host, 10^7 unknowns (H100) | {tri['floor']} the serial transfer "
        f"floor, {tri['gtsv2']} cuSPARSE gtsv2's time with the same transfers "
        "| [docs/tridiag.md](docs/tridiag.md) |",
        "| search strategies against Kernel Tuner's, on recorded data | per budget, per GPU, with intervals "
        "| [docs/strategies.md](docs/strategies.md) |",
        "| your own kernel: the example 2-D convolution, its whole space "
        f"({conv['rows']} configurations) on an H100 | measured in {conv['seconds']} s, compiles included; "
        f"the pick takes {conv['pick']} the default's time | [docs/kernel.md](docs/kernel.md) |",
        _live_search_row(root),
        _live_default_row(root),
        _time_to_pick_row(root),
    ]
    return "\n".join(lines) + "\n"


def _live_default_row(root: Path) -> str:
    """The summary's row for the default search at its default budget, live on one H100 (fused CFD space;
    the newest such check, ``data/combined/search_worst_seed/live_h100_400_second``: seeds 0-3 in one call,
    seed 4 in the next, each against the sweep's fastest rows re-measured in its call): each seed's pick over
    the sweep's fastest row, and the wall time's range against the 6,000-sample sweep's."""
    folder = root / "data/combined/search_worst_seed/live_h100_400_second"
    calls = [_load(folder / part / "remeasure.json") for part in ("cfd", "cfd_seed4")]
    runs = sorted(
        (r["seed"], r["against_best_row"]["ratio"], r["wall_s"] / call["reference_sweep_seconds"])
        for call in calls
        for r in call["searches"]
    )
    budget = calls[0]["searches"][0]["budget"]
    ratios = ", ".join(f"{ratio:.3f}" for _, ratio, _ in runs)
    walls = [wall for _, _, wall in runs]
    return (
        f"| the default search at its default budget ({budget} measurements), the fused CFD space on one "
        f"H100 ({len(runs)} seeds) | each seed's pick against the 6,000-sample sweep's best row re-measured: "
        f"{ratios}, in {min(walls):.2f}-{max(walls):.2f}x the sweep's time "
        "| [docs/strategies.md](docs/strategies.md) |"
    )


def _live_search_row(root: Path) -> str:
    """The summary's live-search row: the fused CFD space at 200 measurements, each strategy's mean pick over
    the sweep's fastest row (re-measured) and its wall time against the 6,000-sample sweep's."""
    summary = _load(root / "data/cfd/h100/live_search/cards4/remeasure.json")
    cells = []
    for strategy in ("iterative", "evolve"):
        runs = [r for r in summary["searches"] if r["strategy"] == strategy and r["budget"] == 200]
        ratio = sum(r["against_best_row"]["ratio"] for r in runs) / len(runs)
        wall = sum(r["wall_s"] for r in runs) / len(runs) / summary["reference_sweep_seconds"]
        cells.append(f"`{strategy}`'s pick {ratio:.3f}x the sweep's best, in {wall:.2f}x its time")
    return (
        "| a live search with a budget of 200 measurements, the fused CFD space on H100s "
        f"({len(runs)} seeds) | against a 6,000-sample sweep (its best rows re-measured): "
        + "; ".join(cells)
        + " | [docs/strategies.md](docs/strategies.md) |"
    )


def _kernel_convolution_figures(root: Path) -> dict[str, str]:
    """The example convolution's whole space on the H100 (``data/convolution/h100/sweep``): rows, seconds,
    the pick against the default."""
    folder = root / "data" / "convolution" / "h100" / "sweep"
    timing = _load(folder / "timing.json")
    c = _load(folder / "validation.json")["h100"]["comparison"]
    return {
        "rows": f"{timing['rows']:,}",
        "seconds": f"{timing['seconds']:.0f}",
        "pick": f"{_g(c['ratio'])}x [{_g(c['low'])}, {_g(c['high'])}]",
    }


def _kernel_convolution(root: Path) -> str:
    """One sentence for docs/kernel.md: the example's whole space measured through the pipeline on the
    H100, and what compiling ahead gives (``data/convolution/h100/compile_ahead``)."""
    f = _kernel_convolution_figures(root)
    runs = json.loads((root / "data/convolution/h100/compile_ahead/compile_ahead.json").read_text())
    rate = {int(r["compile_workers"]) > 0: float(r["samples_per_minute"]) for r in runs}
    text = (
        "On one H100, `launchtune sweep cluster_configs/sweeps/kernel_convolution.yaml` measured all "
        f"{f['rows']} configurations in {f['seconds']} s, every one compiled and checked against the "
        f"default's output; the pipeline's pick takes {f['pick']} the default configuration's time (95%, "
        "re-measured in interleaved rounds). Compiling ahead on the host's cores gave "
        f"{rate[True]:,.0f} configurations a minute against {rate[False]:,.0f} compiling each when needed "
        "([data/convolution/h100/](../data/convolution/h100/))."
    )
    return _paragraph(text)


def _tridiag_at(root: Path, gpu: str, size: int) -> dict[str, str]:
    """The fastest SPIKE configuration at ``size`` (``data/tridiag/<gpu>/streamed/ratios.csv``): its time over
    the serial transfer floor and over gtsv2 with the same transfers, as "ratio [low, high]"."""
    import csv

    with (root / "data" / "tridiag" / gpu / "streamed" / "ratios.csv").open() as fh:
        at = [r for r in csv.DictReader(fh) if int(r["size"]) == size]
    if not at:
        raise ReadmeError(f"data/tridiag/{gpu}/streamed/ratios.csv: no rows at size {size:,}")
    on_floor = [r for r in at if r["a"] == "floor_copy" and r["b"].rsplit("_", 1)[0] == "spike"]
    spike = min(on_floor, key=_ms)
    vs = next(r for r in at if r["a"] == "gtsv2" and r["b"] == spike["b"])
    floor = (
        f"{float(spike['b_over_serial_floor']):.3f}x [{float(spike['floor_low']):.3f}, "
        f"{float(spike['floor_high']):.3f}]"
    )
    return {"floor": floor, "gtsv2": _interval(vs).replace(" [", "x [", 1)}


def _make_test(root: Path) -> str:
    """``make test`` as ``python3 -m tools.record_run`` recorded it (data/ci/): the suite's time as the range
    over every recorded run, with the machines' load during those runs (one time on a shared machine is no
    promise), and the last run's test count and outcome at its commit."""
    run = _load(root / "data" / "ci" / "last_run.json")
    runs = _recorded_runs(root / "data" / "ci" / "runs.jsonl") or [run]
    counts = run["counts"]
    collected = sum(counts.values())
    outcome = ", ".join(f"{n:,} {k}" for k, n in counts.items() if n)
    at = f"commit `{run['commit'][:7]}`" + (" with uncommitted changes" if run.get("dirty") else "")
    failed = "" if run["rc"] == 0 else f", and it FAILED (exit code {run['rc']})"
    minutes = sorted(r["pytest_s"] / 60 for r in runs if r.get("pytest_s"))
    during = [r.get("load_1min_during") or [r.get("load_1min_after")] for r in runs]
    loads = [x for pair in during for x in pair if x is not None]
    machines = sorted({r["machine"] for r in runs if r.get("machine")})
    span = f"{minutes[0]:.1f}" if minutes[0] == minutes[-1] else f"{minutes[0]:.1f} to {minutes[-1]:.1f}"
    extra = (run["wall_s"] - run["pytest_s"]) / 60 if run.get("wall_s") and run.get("pytest_s") else None
    return _paragraph(
        f"The test suite took {span} minutes on {' and '.join(machines)} over {len(runs)} recorded runs of "
        f"`make test`, at a 1-minute load average between {min(loads):g} and {max(loads):g} during them (the "
        f"busier the machine, the longer){_install(extra)}. The last run recorded in full (a fresh clone, "
        f"{at}) ran {collected:,} tests: {outcome} (the GPU and SLURM tests skip where there is none)"
        f"{failed}."
    )


def _install(extra_minutes: float | None) -> str:
    if extra_minutes is None:
        return ""
    return f"; on a fresh clone the install and lint add about {max(extra_minutes, 0.1):.1f} minutes"


def _recorded_runs(path: Path) -> list[dict]:
    """Every run ``tools.record_run`` appended (data/ci/runs.jsonl), oldest first; none where absent."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _scale(root: Path) -> str:
    """The scale rehearsal's sweeps with the current merge (data/rehearsal/cpu/scale/results*.jsonl)."""
    folder = root / "data" / "rehearsal" / "cpu" / "scale"
    runs = []
    for name in ("results.jsonl", "results_device.jsonl"):
        with open(folder / name) as f:
            runs += [json.loads(line) for line in f if line.strip()]
    runs = [r for r in runs if r.get("kind") == "sweep" and r.get("merge") == "streamed"]
    if not runs:
        raise ReadmeError(f"{folder}: no sweep row with the streamed merge")
    lines = [
        "| machine | samples | workers | sleep x | batch | wall / ideal | client + scheduler ms a task "
        "| worker ms a sample | each sample once | merge s, MiB | load (1 min) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |",
    ]
    for r in sorted(runs, key=lambda r: (r["samples"], r["workers"], r["machine"])):
        cores = int(str(r["machine"]).split(", ")[1].split()[0])
        pinned = len(r.get("cores_usable", [])) or cores
        where = f"{cores}-core {'VM' if cores == 2 else 'host'}" + (
            f", pinned to {pinned} cores" if pinned < cores else ""
        )
        lines.append(
            f"| {where} | {r['samples']:,} | {r['workers']} | {r['time_scale']:g} | {r['batch_size']} "
            f"| {r['ratio_to_ideal']:.3f} | {r['scheduler_cpu_ms_per_task']:.1f} "
            f"| {r['worker_cpu_ms_per_sample']:.2f} | {'yes' if r['every_sample_once'] else '**no**'} "
            f"| {r['merge_s']:.1f}, {r['merge_peak_rss_mb']:.0f} | {r['load_during'][0]:.1f} |"
        )
    return "\n".join(lines) + "\n"


def _kernel_tuner_examples(root: Path) -> str:
    """Kernel Tuner's examples run by both tools on one GPU (data/kernel_tuner_examples/examples.json)."""
    from benchmarks.kernel_tuner_examples_table import table

    rows: list[dict] = json.loads((root / "data" / "kernel_tuner_examples" / "examples.json").read_text())
    return table(rows) + "\n"


# benchmarks/time_to_pick_gpu.sh's time_to_pick.json, committed from the lead's run (with its README)
TIME_TO_PICK = "data/combined/time_to_pick/time_to_pick.json"


def _time_to_pick(root: Path) -> str:
    """Time to a tuned configuration against Kernel Tuner: each case, budget and seed, and its examples
    (``benchmarks.time_to_pick.table`` of the committed JSON)."""
    from benchmarks.time_to_pick import table

    return table(_load(root / TIME_TO_PICK))


def _time_to_pick_row(root: Path) -> str:
    """The README's Measured row of the same JSON (``benchmarks.time_to_pick.readme_row``)."""
    from benchmarks.time_to_pick import readme_row

    return readme_row(_load(root / TIME_TO_PICK))


BLOCKS: dict[str, Callable[[Path], str]] = {
    "kernel_tuner_examples": _kernel_tuner_examples,
    "time_to_pick": _time_to_pick,
    "summary": _summary,
    "make_test": _make_test,
    "autotune_h200": _autotune,
    "multi_gpu_table": _multi_gpu_table,
    "multi_gpu_summary": _multi_gpu_summary,
    "cfd_sweeps": _cfd_sweeps,
    "cfd_combined": _combined,
    "strategies_kt": file_block("data/convolution/hub/strategies_kt/table.md"),
    "scale_rehearsal": _scale,
    "strategies_kt_intervals": _intervals_block("data/convolution/hub/strategies_kt"),
    "autotune_fused_h100": _autotune_fused,
    "cfd_strategies_kt": file_block("data/cfd/combined/strategies_kt/table.md"),
    "cfd_strategies_kt_intervals": _intervals_block("data/cfd/combined/strategies_kt"),
    "cfd_paper_strategies_kt_intervals": _intervals_block("data/cfd/combined/strategies_kt_paper"),
    "tridiag_host_to_host": _tridiag_host_to_host,
    "tridiag_spike_models": _tridiag_spike_models,
    "cfd_fused_pick": _cfd_fused_pick,
    "cfd_stage_tuning": _cfd_stage_tuning,
    "cfd_cross_card": _cfd_cross_card,
    "cfd_arith_strategies_kt": file_block("data/cfd/h100/strategies_fused_arith/table.md"),
    "cfd_arith_strategies_kt_intervals": _intervals_block("data/cfd/h100/strategies_fused_arith"),
    "cfd_arith_strategies_kt_h200": file_block("data/cfd/h200/strategies_fused_arith/table.md"),
    "cfd_strategies_transfer": file_block("data/cfd/combined/strategies_transfer/table.md"),
    "cfd_arith_strategies_kt_h200_intervals": _intervals_block("data/cfd/h200/strategies_fused_arith"),
    "strategies_kt_h100_convolution": file_block("data/convolution/h100/strategies_kt/table.md"),
    "strategies_kt_h100_convolution_intervals": _intervals_block("data/convolution/h100/strategies_kt"),
    "search_batching_conv": file_block("data/convolution/hub/search_batching/table.md"),
    "search_batching_cfd_h100": file_block("data/cfd/h100/search_batching/table.md"),
    "live_search_cfd_h100": file_block("data/cfd/h100/live_search/summary.md"),
    "live_search_cfd_h100_cards4": file_block("data/cfd/h100/live_search/cards4/summary.md"),
    "live_search_one_card_against_four": file_block("data/convolution/h200x4/live_search_cards/summary.md"),
    "live_search_cfd_h100_evolve": file_block("data/cfd/h100/live_search/evolve/summary.md"),
    "live_search_cfd_h100_levels": file_block("data/cfd/h100/live_search/levels/summary.md"),
    "live_search_convolution_h100": file_block("data/convolution/h100/live_search/eight_seeds/summary.md"),
    "kernel_convolution_h100": _kernel_convolution,
    "worst_seed_summary": file_block("data/combined/search_worst_seed/summary.md"),
    "autotune_user_h100": file_block("data/convolution/h100/autotune_user/summary.md"),
    "worst_seed_live_cfd_h100": file_block(
        "data/combined/search_worst_seed/live_h100/cfd/summary.md", tables_only=True
    ),
    "worst_seed_live_convolution_h100": file_block(
        "data/combined/search_worst_seed/live_h100/convolution/summary.md", tables_only=True
    ),
    "kernel_heat_h100": file_block("data/heat/h100/live_search/summary.md", tables_only=True),
    "timing_parity_h100": file_block("data/heat/h100/timing_parity/parity.md"),
    "worst_seed_alternatives": file_block("data/combined/search_worst_seed/alternatives.md"),
    "worst_seed_calibration": file_block("data/combined/search_worst_seed/third/calibration.md"),
    "worst_seed_floor_summary": file_block("data/combined/search_worst_seed/third/summary.md"),
    "worst_seed_screen": file_block("data/combined/search_worst_seed/third/screen.md"),
    "worst_seed_needles": file_block("data/combined/search_worst_seed/third/needles.md"),
    "worst_seed_by_budget": file_block("data/combined/search_worst_seed/fourth/by_budget.md"),
    "worst_seed_live_400_cfd_h100": file_block(
        "data/combined/search_worst_seed/live_h100_400/cfd/summary.md", tables_only=True
    ),
    "worst_seed_live_400_cfd_h100_seed4": file_block(
        "data/combined/search_worst_seed/live_h100_400/cfd_seed4/summary.md", tables_only=True
    ),
    "worst_seed_by_strategy_400": file_block("data/combined/search_worst_seed/fourth/by_strategy.md"),
    "worst_seed_batching4": file_block("data/combined/search_worst_seed/third/batching4/summary.md"),
    "worst_seed_live_floor_cfd_h100": file_block(
        "data/combined/search_worst_seed/live_h100_floor/cfd/summary.md", tables_only=True
    ),
    "worst_seed_live_floor_cfd_h100_seed4": file_block(
        "data/combined/search_worst_seed/live_h100_floor/cfd_seed4/summary.md", tables_only=True
    ),
}
