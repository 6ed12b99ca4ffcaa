"""``pipeline.results.figures``: every figure draws from small frames, with labelled axes and a legend."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from launchtune.pipeline import results
from launchtune.pipeline.results import figures

from .conftest import launch_log, streams_frame, sweep_frame


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def check(fig, legends: bool = True) -> None:
    """Every visible axes has both labels (units in brackets or words), and a legend where asked."""
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
    assert axes
    for ax in axes:
        assert ax.get_xlabel() or ax.get_ylabel()
    main = [ax for ax in axes if ax.get_xlabel()]
    # a panel sharing its y axis with a labelled one needs no label of its own
    assert all(any(a.get_ylabel() for a in ax.get_shared_y_axes().get_siblings(ax)) for ax in main)
    if legends:
        assert all(ax.get_legend() is not None for ax in main)
    fig.canvas.draw()  # the whole figure renders


def test_runtime_distributions_mark_the_reference_times():
    t = pd.Series(np.geomspace(1, 10, 50))
    fig = figures.runtime_distributions({"h100": t, "cpu": t * 100}, {"h100": {"default": 2.0}})
    check(fig)
    labels = [x.get_text() for x in fig.axes[0].get_legend().get_texts()]
    assert any(x.startswith("default 2 ms") for x in labels) and "log scale" in fig.axes[0].get_xlabel()


def test_kernel_heatmaps_star_the_fastest_cell():
    rows = sweep_frame(("h100",), n=300)
    plan = {"params": ["a.blocks", "a.threads", "b.blocks", "b.threads"], "kernels": ["a", "b"]}
    grids = {k: results.kernel_grid(rows, plan, k) for k in ("a", "b")}
    fig = figures.kernel_heatmaps(grids, "t")
    check(fig)
    assert "best (300, 128)" in fig.axes[0].get_legend().get_texts()[0].get_text()
    assert any("ms" in ax.get_ylabel() for ax in fig.axes if ax.get_label() == "<colorbar>")


def test_pred_vs_actual_colours_classes_and_goes_log_over_wide_ranges():
    pred = pd.DataFrame(
        {
            "gpu_class": ["h200"] * 4 + ["h100"] * 4,
            "split": ["train", "test"] * 4,
            "measured_ms": [1, 10, 20, 30, 1.5, 11, 21, 31],
        }
    )
    pred["predicted_ms"] = pred["measured_ms"] * 1.01
    fig = figures.pred_vs_actual(pred, "combined")
    check(fig)
    assert len(fig.axes) == 2 and fig.axes[0].get_xscale() == "log" and "R2=" in fig.axes[1].get_title()
    assert len(fig.axes[0].get_legend().get_texts()) == 3  # two classes and y = x


def test_pred_vs_actual_gives_classes_far_apart_their_own_axes():
    """A CPU 100x slower than the GPU on one log axis squashed the GPU into a corner: one row per class."""
    pred = pd.DataFrame(
        {
            "gpu_class": ["cpu"] * 4 + ["h100"] * 4,
            "split": ["train", "test"] * 4,
            "measured_ms": [100, 110, 120, 130, 1, 1.1, 1.2, 1.3],
        }
    )
    pred["predicted_ms"] = pred["measured_ms"] * 1.01
    fig = figures.pred_vs_actual(pred, "combined")
    check(fig)
    assert len(fig.axes) == 4
    assert fig.axes[0].get_title().startswith("combined cpu train") and fig.axes[2].get_xlim()[1] < 2


def test_surrogate_bars_and_loss():
    table = pd.DataFrame(
        {
            "group": ["h100", "combined"],
            "model": ["mlp", "mlp"],
            "r2_train": [0.9, 0.95],
            "r2_test": [0.8, -0.2],
        }
    )
    check(figures.r2_bars(table))
    check(figures.loss_history({"h100": np.geomspace(1, 0.01, 50), "combined": np.geomspace(1, 0.02, 50)}))
    loco = pd.DataFrame({"held_out": ["cpu"], "model": ["gbr"], "r2_test": [-8e4], "spearman": [0.7]})
    fig = figures.score_bars(loco, "held_out", {"r2_test": "R2", "spearman": "rho"}, "loco")
    check(fig)
    ax = fig.axes[0]
    assert ax.get_ylim()[0] > -2 and "cut" in fig._suptitle.get_text()  # -80,000 does not squash the rest
    assert "-8e+04" in [t.get_text() for t in ax.texts]


def test_stream_figures(tmp_path):
    frame = streams_frame()
    times = frame[["size", "streams", "total_ms"]]
    fig = figures.stream_times(times, "h100")
    check(fig)
    assert [ax.get_title().split(" (")[0] for ax in fig.axes] == [
        "sizes 1e3 .. 1e4",
        "sizes 1e4 .. 1e5",
        "sizes 1e6 .. 1e7",
    ]
    speed = pd.DataFrame({"size": [1000, 10000], "over_one_stream": [1.0, 1.2], "over_gtsv2": [0.5, 0.9]})
    check(figures.stream_speedups({"h100 raw": speed}))


def test_autotune_figures():
    log = launch_log()
    fig = figures.launch_timeline(log, "scan")
    check(fig, legends=False)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["startup", "idle", "threads per block"]
    assert fig.axes[0].get_title() == "a: locked (300, 128)"
    per_step = pd.DataFrame(
        {"run": ["off"] * 3 + ["scan"] * 3, "step": [0, 1, 2] * 2, "ms": [1, 1, 1, 3, 2, 1]}
    )
    check(figures.step_times(per_step))
