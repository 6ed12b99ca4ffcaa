"""Where the results a notebook reads are: an argument, ``$LAUNCHTUNE_NOTEBOOK_RESULTS``, else the committed
``data/``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UserError

RESULTS_ENV = "LAUNCHTUNE_NOTEBOOK_RESULTS"  # set by `launchtune notebooks --results DIR`
REPO = Path(__file__).resolve().parents[2]
DEFAULT_RESULTS = REPO / "data"


def results_folder(path: str | Path | None = None) -> Path:
    """The results folder a notebook reads: ``path``, else ``$LAUNCHTUNE_NOTEBOOK_RESULTS``, else ``data/``.

    A relative path is tried against the working directory, then the repository root, so the same first cell
    works from ``notebooks/`` in Jupyter and from the repository root under ``make notebooks``.
    """
    value = path if path not in (None, "") else os.environ.get(RESULTS_ENV) or DEFAULT_RESULTS
    if value == DEFAULT_RESULTS and not DEFAULT_RESULTS.is_dir():  # installed from a wheel: no data/
        raise UserError(
            "no results folder named: give --results DIR (a folder of sweeps, such as the results/ that "
            "launchtune sweep writes); the committed data/ comes with a checkout of the repository only"
        )
    value = Path(value).expanduser()
    candidates = [value] if value.is_absolute() else [Path.cwd() / value, REPO / value]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate.resolve()
    raise UserError(f"{value}: no such results folder (tried {', '.join(str(c) for c in candidates)})")
