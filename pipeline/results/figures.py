"""The figures of the report and the notebooks, drawn from plain DataFrames (``pipeline.results`` makes them).

Each function returns a matplotlib ``Figure`` and chooses no backend: in a notebook the inline backend shows
it; headless callers select Agg before importing this module, save the figure and close it.
Every axis carries its unit, every figure with more than one series a legend.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter
from sklearn.metrics import r2_score

STATE_COLOURS = {"startup": "tab:orange", "scanning": "tab:red", "idle": "tab:blue"}


def _grid(n: int, cols: int, width: float, height: float, **kw) -> tuple[Figure, list]:
    cols = max(1, min(cols, n))
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, **kw)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _plain_log(ax, axis: str = "y") -> None:
    """Log-scale tick labels as plain numbers (0.2, 1, 5) rather than 2 x 10^-1. Between the decades: 2, 3
    and 5 where the axis spans under two decades, 2 and 5 under three, none beyond (they would collide)."""
    target = ax.yaxis if axis == "y" else ax.xaxis

    def minor(v: float, _: int) -> str:
        lo, hi = sorted(target.get_view_interval())
        span = hi / lo if lo > 0 else math.inf
        keep = (2, 3, 5) if span < 100 else (2, 5) if span < 1000 else ()
        return f"{v:g}" if _mantissa(v) in keep else ""

    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_formatter(FuncFormatter(minor))


def _ms(v: float) -> str:
    """Four significant digits without an exponent: 3.768, 0.1421, 17,980."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def _mantissa(v: float) -> int:
    return round(v / 10 ** math.floor(math.log10(v))) if v > 0 else 0


def _wide_range(*values: np.ndarray, ratio: float = 20) -> bool:
    """Log axes where positive values span more than ``ratio`` (CPU and GPU times in one plot)."""
    v = np.concatenate([np.asarray(x, dtype=float).ravel() for x in values])
    v = v[np.isfinite(v) & (v > 0)]
    return len(v) > 0 and v.max() / v.min() > ratio


# -- sweeps ------------------------------------------------------------------------------------------------
def runtime_distributions(
    times: Mapping[str, pd.Series],
    markers: Mapping[str, Mapping[str, float]] | None = None,
    xlabel: str = "time per step (ms)",
    bins: int = 60,
) -> Figure:
    """One histogram per GPU class of the sampled configurations' times, reference times as vertical lines
    (each class its own panel: classes differ by orders of magnitude)."""
    fig, axes = _grid(len(times), 3, 4.6, 3.4)
    styles = ["--", ":", "-."]
    for ax, (label, t) in zip(axes, times.items(), strict=True):
        t = pd.Series(t).dropna()
        log = len(t) > 1 and t.min() > 0 and t.max() / t.min() > 3
        edges = np.geomspace(t.min(), t.max(), bins + 1) if log else bins
        ax.hist(t, bins=edges, color="tab:blue", alpha=0.75, label=f"{len(t):,} samples")
        if log:
            ax.set_xscale("log")
            _plain_log(ax, "x")
        ax.axvline(t.median(), color="black", lw=1, label=f"median {_ms(t.median())} ms")
        for i, (name, ms) in enumerate((markers or {}).get(label, {}).items()):
            ax.axvline(
                ms, color=f"C{i + 1}", ls=styles[i % len(styles)], lw=1.5, label=f"{name} {_ms(ms)} ms"
            )
        ax.set_title(label)
        ax.set_xlabel(xlabel + (", log scale" if log else ""))
        ax.set_ylabel("configurations")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def kernel_heatmaps(grids: Mapping[str, pd.DataFrame], title: str = "", cols: int = 4) -> Figure:
    """Each kernel's median time over its (blocks, threads) grid, the fastest cell starred: Fig. 2 of the CFD
    seed, once per kernel. Axes are labelled by the grids' index and column names (a ``kernel`` spec's grid
    spans its thread block, ``block_size_x`` by ``block_size_y``)."""
    fig, axes = _grid(len(grids), cols, 3.9, 3.9)
    for ax, (kernel, grid) in zip(axes, grids.items(), strict=True):
        z = grid.to_numpy(dtype=float)
        finite = z[np.isfinite(z) & (z > 0)]
        # log colours: the worst corner (few threads, few blocks) is 10x the rest and would flatten it
        norm = LogNorm(finite.min(), finite.max()) if len(finite) and finite.max() > finite.min() else None
        im = ax.imshow(z, origin="lower", aspect="auto", cmap="viridis_r", norm=norm)
        ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns], rotation=90, fontsize=7)
        ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index], fontsize=7)
        ax.set_xlabel(grid.columns.name or "blocks")
        ax.set_ylabel("threads per block" if grid.index.name in (None, "threads") else grid.index.name)
        if np.isfinite(z).any():
            i, j = np.unravel_index(np.nanargmin(z), z.shape)
            ax.plot(
                j,
                i,
                marker="*",
                color="red",
                ms=12,
                ls="none",
                label=f"best ({grid.columns[j]}, {grid.index[i]}): {_ms(z[i, j])} ms",
            )
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3), frameon=False)
        bar = fig.colorbar(im, ax=ax, label="median kernel time (ms, log colours)")
        _plain_log(bar.ax)
        ax.set_title(kernel)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


# -- surrogates --------------------------------------------------------------------------------------------
def pred_vs_actual(pred: pd.DataFrame, title: str = "", unit: str = "time per step (ms)") -> Figure:
    """Predicted against measured time, train and test side by side with y = x (Figs. 11 and 14 of the CFD
    seed); points coloured by GPU class where there is more than one. ``pred`` has ``split``,
    ``measured_ms``, ``predicted_ms`` and optionally ``gpu_class``.

    Classes whose times lie more than 10x apart (a CPU beside GPUs) get a row of panels each, with their own
    axes: on one shared log axis the GPUs would be squashed into one corner."""

    classes = sorted(pred["gpu_class"].unique()) if "gpu_class" in pred else [None]
    medians = [float(pred[pred["gpu_class"] == c]["measured_ms"].median()) for c in classes if c is not None]
    separate = len(medians) > 1 and min(medians) > 0 and max(medians) / min(medians) > 10
    groups = [[c] for c in classes] if separate else [classes]
    fig, axes = plt.subplots(len(groups), 2, figsize=(10, 4.4 * len(groups)), squeeze=False)
    for row, group in zip(axes, groups, strict=True):
        sub = pred if group == [None] else pred[pred["gpu_class"].isin(group)]
        y, p = sub["measured_ms"].to_numpy(float), sub["predicted_ms"].to_numpy(float)
        lo, hi = float(np.nanmin([y.min(), p.min()])), float(np.nanmax([y.max(), p.max()]))
        log = _wide_range(y, p) and lo > 0
        for ax, part in zip(row, ("train", "test"), strict=True):
            rows = sub[sub["split"] == part]
            for cls in group:
                r = rows if cls is None else rows[rows["gpu_class"] == cls]
                ax.scatter(
                    r["measured_ms"],
                    r["predicted_ms"],
                    s=5,
                    alpha=0.45,
                    color=f"C{classes.index(cls)}",
                    label=f"{cls or 'samples'} (n={len(r):,})",
                )
            ax.plot([lo, hi], [lo, hi], color="red", lw=1, label="predicted = measured")
            r2 = r2_score(rows["measured_ms"], rows["predicted_ms"]) if len(rows) > 1 else float("nan")
            name = f"{title + ' ' if title else ''}{f'{group[0]} ' if separate else ''}"
            ax.set_title(f"{name}{part} (n={len(rows):,}, R2={r2:.3f})")
            ax.set_xlabel(f"measured {unit}")
            ax.set_ylabel(f"predicted {unit}")
            ax.set_xlim(lo, hi)
            ax.set_ylim(lo, hi)
            if log:
                ax.set_xscale("log")
                ax.set_yscale("log")
                _plain_log(ax, "x")
                _plain_log(ax, "y")
            ax.legend(fontsize=7, markerscale=2, loc="upper left")
    fig.tight_layout()
    return fig


def loss_history(
    curves: Mapping[str, np.ndarray],
    title: str = "MLP loss history",
    held_out: Mapping[str, np.ndarray] | None = None,
) -> Figure:
    """Training loss per epoch, one line per group (Fig. 12 of the CFD seed: independent vs combined); with
    ``held_out``, each group's loss on its held-out rows after each epoch too, dashed in the same colour, so
    a model that fits its training rows and misses the held-out ones (over-fitting) shows as a gap."""
    fig, ax = plt.subplots(figsize=(6, 4))
    held_out = held_out or {}
    for group, curve in curves.items():
        (line,) = ax.semilogy(np.arange(1, len(curve) + 1), curve, label=f"{group}: training")
        other = held_out.get(group)
        if other is not None and len(other):
            ax.semilogy(
                np.arange(1, len(other) + 1), other, "--", color=line.get_color(), label=f"{group}: held-out"
            )
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss (squared error / 2 of the\nstandardised time, log scale)")
    ax.set_title(title)
    if curves:
        ax.legend(title="rows")
    fig.tight_layout()
    return fig


def score_bars(
    table: pd.DataFrame,
    x: str,
    series: Mapping[str, str],
    title: str = "",
    xlabel: str = "",
    ylabel: str = "R2 (1 = perfect)",
    panel: str = "model",
) -> Figure:
    """Grouped bars: one panel per ``panel`` value (model), one bar group per ``x`` value, one bar per column
    of ``series`` ({column: legend label}), each labelled with its value.

    Scores below ``floor`` (an R2 of -80,000 where a model meets a class it never saw) are cut at the floor,
    hatched, and still labelled with their value, so they do not squash every other bar to nothing.
    """
    floor = -1.0
    panels = list(dict.fromkeys(table[panel]))
    fig, axes = _grid(len(panels), 3, 4.4, 3.6, sharey=True)
    width = 0.8 / len(series)
    values = pd.to_numeric(table[list(series)].stack(), errors="coerce")
    lo = max(floor, min(0.0, float(values.min()))) if values.notna().any() else 0.0
    cut = False
    for ax, name in zip(axes, panels, strict=True):
        t = table[table[panel] == name]
        pos = np.arange(len(t))
        handles = []
        for i, (col, label) in enumerate(series.items()):
            vals = pd.to_numeric(t[col], errors="coerce").to_numpy(float)
            shown = np.maximum(vals, floor)
            bars = ax.bar(
                pos + (i - (len(series) - 1) / 2) * width, shown, width=width, color=f"C{i}", label=label
            )
            for bar, v in zip(bars, vals, strict=True):
                if v < floor:
                    bar.set_hatch("//")
                    cut = True
            handles.append(Patch(facecolor=f"C{i}", label=label))  # unhatched, whatever the first bar is
            ax.bar_label(
                bars, labels=[f"{v:.3g}" if v < floor else f"{v:.3f}" for v in vals], fontsize=7, padding=1
            )
        ax.set_xticks(pos, [str(v) for v in t[x]], rotation=20)
        ax.set_xlim(-0.7, max(len(t), 2) - 0.3)
        ax.set_ylim(lo - 0.12 if lo < 0 else 0, 1.12)
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel(xlabel or x)
        ax.set_ylabel(ylabel)
        ax.set_title(str(name))
        ax.legend(handles=handles, fontsize=8, loc="best")
    if title or cut:
        fig.suptitle(title + (f" (hatched: below {floor:g}, cut)" if cut else ""))
    fig.tight_layout()
    return fig


def r2_bars(table: pd.DataFrame, title: str = "R2 on the seeded 75/25 split") -> Figure:
    """Train and test R2 per group, one panel per model (Fig. 13 of the CFD seed); ``table`` is
    ``results.r2_table``'s."""
    return score_bars(table, "group", {"r2_train": "train", "r2_test": "test"}, title, xlabel="trained on")


# -- tridiagonal streams -----------------------------------------------------------------------------------
def stream_times(times: pd.DataFrame, title: str = "") -> Figure:
    """End-to-end time against the number of streams, one line per size; one panel per decade of sizes (the
    seed's sizes are 10^i x {1, 2.5, 4, 5, 7.5, 8})."""
    decades = sorted({int(math.floor(math.log10(s))) for s in times["size"]})
    fig, axes = _grid(len(decades), 3, 4.6, 3.6)
    for ax, d in zip(axes, decades, strict=True):
        part = times[(times["size"] >= 10**d) & (times["size"] < 10 ** (d + 1))]
        for i, (size, t) in enumerate(part.groupby("size")):
            t = t.sort_values("streams")
            best = t.loc[t["total_ms"].idxmin()]
            ax.plot(t["streams"], t["total_ms"], marker="o", ms=3, color=f"C{i}", label=f"{size:,.0f}")
            ax.plot(best["streams"], best["total_ms"], marker="*", ms=11, color=f"C{i}", ls="none")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _plain_log(ax)
        ks = sorted(times["streams"].unique())
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel("CUDA streams")
        ax.set_ylabel("end-to-end time (ms)")
        ax.set_title(f"sizes 1e{d} .. 1e{d + 1} (star: fastest)")
        ax.legend(title="unknowns", fontsize=7, title_fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def stream_speedups(speedups: Mapping[str, pd.DataFrame], title: str = "") -> Figure:
    """Speed-up of the best stream count over one stream (left) and over cuSPARSE gtsv2 with the same
    transfers (right), against system size; one line per measurement folder (GPU class, raw or denoised)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for i, (label, s) in enumerate(speedups.items()):
        axes[0].plot(s["size"], s["over_one_stream"], marker="o", ms=3, color=f"C{i}", label=label)
        for col, ls, name in (("over_gtsv2", "-", "gtsv2"), ("over_gtsv2_nopivot", "--", "gtsv2_nopivot")):
            if col in s:
                axes[1].plot(
                    s["size"], s[col], marker="o", ms=3, ls=ls, color=f"C{i}", label=f"{label}, {name}"
                )
    for ax, what in zip(axes, ("one stream", "cuSPARSE"), strict=True):
        ax.axhline(1, color="grey", lw=0.8)
        ax.set_xscale("log")
        lines = [ln.get_ydata() for ln in ax.get_lines()]
        if lines and _wide_range(*lines, ratio=4):  # log only where a 10x spike would flatten the rest
            ax.set_yscale("log")
            _plain_log(ax)
        ax.set_xlabel("system size (unknowns)")
        ax.set_ylabel(f"speed-up over {what} (x, >1 = faster)")
        ax.legend(fontsize=7)
    axes[0].set_title("best stream count vs one stream")
    axes[1].set_title("best stream count vs gtsv2 (same transfers)")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


# -- runtime autotuner -------------------------------------------------------------------------------------
def launch_timeline(launches: pd.DataFrame, title: str = "", cols: int = 2) -> Figure:
    """Each kernel's launches over the run (slide 9 of the HOOMD seed): time per launch coloured by the
    tuner's state, and the threads per block it launched with, against the time step on a log axis so the
    scan at the start and the locked remainder both show."""
    kernels = list(dict.fromkeys(launches.sort_values("seq")["kernel"]))
    fig, axes = _grid(len(kernels), cols, 6.0, 2.9)
    legend: dict[str, Any] = {}
    for ax, kernel in zip(axes, kernels, strict=True):
        k = launches[launches["kernel"] == kernel].sort_values("seq")
        x = k["step"] + 1
        right = ax.twinx()
        right.step(x, k["threads"], where="post", color="grey", lw=0.8, alpha=0.7, label="threads per block")
        right.set_ylabel("threads per block", color="grey")
        for state, colour in STATE_COLOURS.items():
            s = k[k["state"] == state]
            if len(s):
                ax.scatter(s["step"] + 1, s["time_ms"], s=4, color=colour, label=state, zorder=3)
        ax.set_zorder(right.get_zorder() + 1)
        ax.patch.set_visible(False)
        ax.set_xscale("log")
        ax.set_xlabel("time step + 1 (log scale)")
        ax.set_ylabel("time per launch (ms)")
        hi = k["time_ms"].quantile(0.995)
        ax.set_ylim(0, hi * 1.1 if np.isfinite(hi) and hi > 0 else None)
        last = k.iloc[-1]
        ax.set_title(f"{kernel}: locked ({int(last['blocks'])}, {int(last['threads'])})")
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, h)
        legend.setdefault(*reversed([h[0] for h in right.get_legend_handles_labels()]))
    # one legend for all panels, at the top: inside a panel it hid either the scan or the locked launches
    fig.legend(
        legend.values(), legend.keys(), loc="upper right", ncols=len(legend), markerscale=2, frameon=False
    )
    fig.suptitle(title or "launch timeline", x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig


def step_times(per_step: pd.DataFrame, title: str = "", max_step: int | None = None) -> Figure:
    """Time per step of each run (``off``, ``scan``, ``seeded``, ...) against the step: what tuning costs
    while it scans and what the locked parameters give after."""
    fig, ax = plt.subplots(figsize=(9, 4))
    for i, (run, r) in enumerate(per_step.groupby("run", sort=False)):
        r = r.sort_values("step")
        if max_step is not None:
            r = r[r["step"] <= max_step]
        ax.plot(r["step"] + 1, r["ms"], lw=0.8, color=f"C{i}", label=run)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log(ax)
    ax.set_xlabel("time step + 1 (log scale)")
    ax.set_ylabel("time per step (ms, log scale)")
    ax.set_title(title or "time per step of each run")
    ax.legend(title="autotune mode")
    fig.tight_layout()
    return fig


def search_trace(traces: Mapping[str, pd.DataFrame], title: str = "", unit: str = "ms") -> Figure:
    """Each class's measurements in the order the strategy got them, and the best so far (a step line)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for cls, t in traces.items():
        ok = np.isfinite(t["ms"])
        (line,) = ax.step(t["measurement"], t["best_ms"], where="post", label=f"{cls}: best so far")
        ax.scatter(t["measurement"][ok], t["ms"][ok], s=8, alpha=0.35, color=line.get_color())
    ax.set_xlabel("measurements (in the order their answers came)")
    ax.set_ylabel(unit)
    if any(_wide_range(t["ms"][np.isfinite(t["ms"])].to_numpy()) for t in traces.values()):
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title(title or "search trace")
    fig.tight_layout()
    return fig


def energy_front(
    classes: Mapping[str, pd.DataFrame], fronts: Mapping[str, list[int]], title: str = ""
) -> Figure:
    """Each class's configurations by time and energy per launch, its Pareto front (a line) and its pick under
    each objective (the front's ends: the fastest, and the least energy)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for k, (cls, rows) in enumerate(classes.items()):
        t, e = rows["total_ms"].to_numpy(float), rows["energy_mJ"].to_numpy(float)
        colour = f"C{k}"
        ax.scatter(t, e, s=10, alpha=0.4, color=colour, label=f"{cls}: {len(rows)} configurations")
        front = fronts[cls]
        ax.plot(t[front], e[front], "-o", ms=4, color=colour, label=f"{cls}: Pareto front")
        ax.scatter([t[front[0]]], [e[front[0]]], marker="^", s=90, facecolors="none", edgecolors=colour, lw=2)
        ax.scatter(
            [t[front[-1]]], [e[front[-1]]], marker="v", s=90, facecolors="none", edgecolors=colour, lw=2
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time per launch (ms; ^ the pick by time)")
    ax.set_ylabel("energy per launch (mJ; v the pick by energy)")
    ax.legend(fontsize=8)
    ax.set_title(title or "time and energy")
    fig.tight_layout()
    return fig
