"""Run-time autotuning after HOOMD-blue: one tuner per kernel, tuned during the real run's steps.

:func:`autotune` wraps your own CUDA kernel (a CuPy ``RawKernel``, or a source with ``#define`` parameters)
so each call launches it in a tuned configuration, seeded from a sweep's table and remembered in your cache
directory (:func:`clear_cache` forgets). Under it, one :class:`Tuning` per key: the candidates, the table's
picks, a remembered pick locked at once, rejected candidates and the state machine (:class:`Autotuner`).

The CFD solver is one more user of :class:`Tuning`: its CLI calls :func:`attach_tuners` (one per kernel,
``--autotune {off,scan,seeded} --tuning-table FILE``; ``whole.attach_whole_tuner`` for ``--space fused``),
:func:`tuning_summary` for ``summary.json`` and :func:`tuning_files` (or :func:`save_tuning`) for the launch
log and the tuned table.
"""

from ..tuning_table import Entry, TableError, TuningTable
from .attach import (
    MODES,
    attach_tuners,
    save_tuning,
    tuning_files,
    tuning_summary,
)
from .cache import cache_dir, clear_cache
from .log import LaunchLog
from .tuner import IDLE, SCANNING, STARTUP, Autotuner, TunerError
from .tuning import Tuning
from .user import AutotuneError, TunedKernel, autotune

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
    "Tuning",
    "TuningTable",
    "attach_tuners",
    "autotune",
    "cache_dir",
    "clear_cache",
    "save_tuning",
    "tuning_files",
    "tuning_summary",
]
