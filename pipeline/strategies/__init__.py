"""Search strategies: one module per strategy, each with one entry point ``tune(session)``.

A new strategy is one new module and one line in ``STRATEGIES``. Every strategy spends exactly its budget of
measurements through a :class:`~pipeline.strategies.base.Session` and the pick is the best configuration it
measured. ``default`` names the one we recommend to users.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from pipeline.strategies.base import Session, StrategyError

STRATEGIES = {
    "random": "random_search",
    "random_mlp": "random_mlp",  # the seed's recipe
    "random_additive": "random_additive",
    "iterative": "iterative",
    "bayes": "bayes",
    "per_kernel_exhaustive": "per_kernel_exhaustive",
    "transfer": "transfer",
}
DEFAULT = (
    "iterative"  # what `--strategy default` runs: best measured regret per measurement without prior data
)
NEEDS_PRIOR = {"transfer"}


def strategy_names() -> list[str]:
    return ["default", *STRATEGIES]


def get_strategy(name: str) -> Callable[[Session], None]:
    resolved = DEFAULT if name == "default" else name
    if resolved not in STRATEGIES:
        raise StrategyError(f"unknown strategy {name!r}: choose one of {', '.join(strategy_names())}")
    return importlib.import_module(f"pipeline.strategies.{STRATEGIES[resolved]}").tune
