"""A search sweep's trace (``launchtune sweep --strategy``): per class, each measurement in the order
its answer reached the strategy (the folder's ``search/<class>.jsonl``; proposal order where it has none)
and the best time found so far."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..store.folder import SweepFolder
from ..store.journal import Journal
from ..store.schema import cost_column


def answer_order(sweep_dir: Path, gpu_class: str) -> list[int]:
    """The proposals of ``gpu_class`` in the order their answers reached the strategy (empty: no journal)."""
    return [order for _, order in Journal(SweepFolder(sweep_dir).search_journal(gpu_class)).read()]


def search_traces(sweep_dir: Path, frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per class of a search: ``measurement`` (1..n), ``ms`` (inf: did not run), ``best_ms`` (so far)."""
    if "proposal_order" not in frame.columns:
        return {}
    traces = {}
    for cls, rows in frame.groupby("gpu_class", sort=True):
        rows = rows.dropna(subset=["proposal_order"]).set_index("proposal_order")
        order = [o for o in answer_order(sweep_dir, str(cls)) if o in rows.index]
        order += [o for o in sorted(rows.index) if o not in set(order)]
        ms = rows.loc[order]
        t = np.where(ms["status"] == "ok", ms[cost_column(list(ms.columns))].astype(float), np.inf)
        traces[str(cls)] = pd.DataFrame(
            {"measurement": np.arange(1, len(t) + 1), "ms": t, "best_ms": np.minimum.accumulate(t)}
        )
    return traces
