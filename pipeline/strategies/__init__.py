"""Search strategies: one module per strategy, each with one entry point ``tune(session)``.

A new strategy is one new module and one line in ``STRATEGIES``. Every strategy spends exactly its budget of
measurements through a :class:`~pipeline.strategies.base.Session` and the pick is the best configuration it
measured. ``default`` names the one we recommend to users. ``kt:<name>`` runs Kernel Tuner's strategy
``<name>`` as a baseline on recorded data (``kernel_tuner_baseline``; needs the optional extra ``kt``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from .base import Session, StrategyError

STRATEGIES = {
    "random": "random_search",
    "random_mlp": "random_mlp",  # the seed's recipe
    "random_additive": "random_additive",
    "iterative": "iterative",
    "bayes": "bayes",
    "per_kernel_exhaustive": "per_kernel_exhaustive",
    "evolve": "evolve",
    "transfer": "transfer",
}
# What `--strategy default` runs: the lowest mean picked/optimum at budgets 20-200 without prior data on the
# Benchmark Hub convolution data (data/convolution/hub/strategies_kt/table.md, issue 17).
DEFAULT = "evolve"
NEEDS_PRIOR = {"transfer"}


def strategy_names() -> list[str]:
    """Ours, then Kernel Tuner's (``kt:<name>``) where it is installed."""
    from .kernel_tuner_baseline import PREFIX, kt_strategy_names

    return ["default", *STRATEGIES, *(PREFIX + n for n in kt_strategy_names())]


def get_strategy(name: str) -> Callable[[Session], None]:
    from . import kernel_tuner_baseline as kt

    if name.startswith(kt.PREFIX):
        return kt.strategy(name[len(kt.PREFIX) :])
    resolved = DEFAULT if name == "default" else name
    if resolved not in STRATEGIES:
        ours = ", ".join(["default", *STRATEGIES])
        raise StrategyError(f"unknown strategy {name!r}: choose one of {ours}, or kt:<Kernel Tuner strategy>")
    return importlib.import_module(f"launchtune.pipeline.strategies.{STRATEGIES[resolved]}").tune
