"""The launch log: one row per timed launch (kernel, step, tuner state, parameters, milliseconds).

Every scan launch is a row; idle launches one in the tuner's ``time_idle`` (timing all of them costs a few
percent of a step).

Written as CSV, which a notebook reads with ``pandas.read_csv`` for a timeline like slide 9 of the HOOMD seed.
CSV rather than Parquet because Parquet belongs to ``pipeline`` (DESIGN.md layering) and a run's log is small.
Launches are timed from CUDA events read later, so ``time_ms`` is filled in after the row is added.
"""

from __future__ import annotations

import csv
from collections.abc import Hashable, Sequence
from pathlib import Path

from ..atomic import atomic_path


class LaunchLog:
    """Rows shared by every tuner of one run, in launch order (``seq``)."""

    def __init__(self, param_names: Sequence[str] = ("blocks", "threads")):
        self.param_names = tuple(param_names)
        self.rows: list[list] = []

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, kernel: str, step: int, state: str, param: Hashable, ms: float | None) -> int:
        values = tuple(param) if isinstance(param, tuple) else (param,)
        self.rows.append([len(self.rows), kernel, step, state, values, ms, False])
        return len(self.rows) - 1

    def set_time(self, row: int, ms: float) -> None:
        self.rows[row][5] = ms

    def mark_nonoptimal(self, row: int) -> None:
        self.rows[row][6] = True

    def write_csv(self, path: str | Path) -> Path:
        """Write atomically (temporary name, then rename) so a killed run never leaves half a log."""
        path = Path(path)
        with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(("seq", "kernel", "step", "state", *self.param_names, "time_ms", "nonoptimal"))
            for seq, kernel, step, state, values, ms, off in self.rows:
                padded = (list(values) + [""] * len(self.param_names))[: len(self.param_names)]
                out.writerow((seq, kernel, step, state, *padded, "" if ms is None else f"{ms:.6g}", int(off)))
        return path
