"""Run-time autotuning after HOOMD-blue: one tuner per kernel, tuned during the real run's steps.

The CFD solver's CLI calls :func:`attach_tuners` (``--autotune {off,scan,seeded} --tuning-table FILE``),
:func:`tuning_summary` for ``summary.json`` and :func:`tuning_files` (or :func:`save_tuning`) for the launch
log and the tuned table.
"""

from launchtune.kernels.autotune.attach import (
    MODES,
    attach_tuners,
    fit_candidates,
    save_tuning,
    tuning_files,
    tuning_summary,
)
from launchtune.kernels.autotune.log import LaunchLog
from launchtune.kernels.autotune.table import Entry, TableError, TuningTable
from launchtune.kernels.autotune.tuner import IDLE, SCANNING, STARTUP, Autotuner, TunerError

__all__ = [
    "IDLE",
    "MODES",
    "SCANNING",
    "STARTUP",
    "Autotuner",
    "Entry",
    "LaunchLog",
    "TableError",
    "TunerError",
    "TuningTable",
    "attach_tuners",
    "fit_candidates",
    "save_tuning",
    "tuning_files",
    "tuning_summary",
]
