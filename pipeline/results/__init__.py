"""Read a results folder for the notebooks: sweep folders, surrogate metrics and predictions, the tridiagonal
streams measurements and the runtime autotuner's launch logs.

A results folder is anything holding these (the committed ``data/`` by default): every subfolder with
``sweep.json`` and ``merged/`` is a sweep, every ``streams.csv`` a tridiagonal measurement, every
``launches*.csv[.gz]`` a tuned run's launch log. Nothing here assumes which GPU classes are present, so a
folder with h100, h200 and cpu sweeps (and their combination) reads the same way as one with a single class.
Reading only: nothing is written, so the notebooks can run on a read-only checkout.

One module per kind of result; this package re-exports their public functions so a notebook needs one
import: ``from launchtune.pipeline import results``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .autotune import (  # noqa: F401
    LAUNCH_COLUMNS,
    autotune_picks,
    autotune_results,
    launch_logs,
    load_launches,
    per_step_times,
    run_summary,
    tuning_steps,
)
from .folders import (  # noqa: F401
    DEFAULT_RESULTS,
    REPO,
    RESULTS_ENV,
    results_folder,
)
from .search import answer_order, search_traces  # noqa: F401
from .sweeps import (  # noqa: F401
    Sweep,
    best_config_table,
    best_configurations,
    best_transfer,
    class_rows,
    grid_axes,
    grid_best,
    kernel_bests,
    kernel_grid,
    kernel_grids,
    launch_space,
    load_sweep,
    load_sweeps,
    of_space,
    reference_times,
    sweep_folders,
    sweep_overview,
    time_label,
)

if TYPE_CHECKING:
    from .learning import (  # noqa: F401
        comparison_table,
        group_model,
        loco_table,
        loss_curves,
        pairs_table,
        prediction_groups,
        prediction_scores,
        predictions,
        r2_table,
        surrogate_sweeps,
    )
    from .tridiag import (  # noqa: F401
        Tridiag,
        load_tridiag,
        load_tridiags,
        optimum_table,
        stream_speedups,
        stream_times,
        tridiag_folders,
    )

# The surrogate models' and the tridiagonal streams' readers need scikit-learn (about a second to import):
# loaded on first use, so what reads a sweep folder without models (a sweep's report, tune_kernel) does
# not pay for it.
_LEARNING = (
    "comparison_table",
    "group_model",
    "loco_table",
    "loss_curves",
    "pairs_table",
    "prediction_groups",
    "prediction_scores",
    "predictions",
    "r2_table",
    "surrogate_sweeps",
)


_TRIDIAG = (
    "Tridiag",
    "load_tridiag",
    "load_tridiags",
    "optimum_table",
    "stream_speedups",
    "stream_times",
    "tridiag_folders",
)


def __getattr__(name: str) -> Any:
    if name in _LEARNING:
        from . import learning

        return getattr(learning, name)
    if name in _TRIDIAG:
        from . import tridiag

        return getattr(tridiag, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
