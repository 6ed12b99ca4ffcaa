"""launchtune: autotuning GPU kernel launch parameters for scientific codes.

One installed package with two layers, each a top-level folder of the repository linked in here:
:mod:`launchtune.kernels` (what runs on the device) and :mod:`launchtune.pipeline` (what plans, measures,
stores, learns and reports). The shipped cluster configs, sweep specs and notebooks are package data
(``launchtune.cluster_configs``, ``launchtune.notebooks``), found through :mod:`importlib.resources`.

The Python API: ``tune_kernel``, ``sweep``, ``load`` (:mod:`launchtune.api`) and ``autotune``, the runtime
tuner for your own kernel (:mod:`launchtune.kernels.autotune`); the command line is ``launchtune`` (or
``python -m launchtune``).
"""

import logging

from launchtune.pipeline.version import __version__ as __version__  # re-exported: launchtune.__version__

# A library logs through `logging` and prints nothing unless its user configures a handler (the CLI does).
logging.getLogger(__name__).addHandler(logging.NullHandler())


_API = ("tune_kernel", "run_kernel", "sweep", "load", "Result", "NoGPUError")
_RUNTIME = ("autotune", "TunedKernel", "AutotuneError")


def __getattr__(name: str):  # the API on first use: `import launchtune` stays fast (no Dask, no pandas)
    if name in _API:
        from launchtune import api

        return getattr(api, name)
    if name in _RUNTIME:
        from launchtune.kernels import autotune

        return getattr(autotune, name)
    raise AttributeError(f"module 'launchtune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API, *_RUNTIME])
