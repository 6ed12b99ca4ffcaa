"""Run-time autotuning after HOOMD-blue: one tuner per kernel, tuned during the real run's steps.

:func:`autotune` wraps your own CUDA kernel (a CuPy ``RawKernel``, or a source with ``#define`` parameters)
so each call launches it in a tuned configuration, seeded from a sweep's table and remembered in your cache
directory (:func:`clear_cache` forgets).

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
from launchtune.kernels.autotune.cache import cache_dir, clear_cache
from launchtune.kernels.autotune.log import LaunchLog
from launchtune.kernels.autotune.table import Entry, TableError, TuningTable
from launchtune.kernels.autotune.tuner import IDLE, SCANNING, STARTUP, Autotuner, TunerError
from launchtune.kernels.autotune.user import AutotuneError, TunedKernel, autotune

__all__ = [
    "IDLE",
    "MODES",
    "SCANNING",
    "STARTUP",
    "AutotuneError",
    "Autotuner",
    "Entry",
    "LaunchLog",
    "TableError",
    "TunedKernel",
    "TunerError",
    "TuningTable",
    "attach_tuners",
    "autotune",
    "cache_dir",
    "clear_cache",
    "fit_candidates",
    "save_tuning",
    "tuning_files",
    "tuning_summary",
]
