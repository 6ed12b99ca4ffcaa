"""Types for command-line flags that take numbers or lists of names: each value is checked where argparse
reads it, so a bad one is one line naming the flag (``pipeline.cli``'s parser prints argparse's errors that
way), before any file or cluster is made.

One rule per kind: an integer in a closed range; a finite real number in a range (NaN and infinities
refused: ``--max-minutes nan`` would otherwise compare false with every bound and pass).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def whole(text: str) -> int:
    """An integer of ASCII digits, any size (the caller checks its range and names the limit)."""
    if not text.isascii():
        raise argparse.ArgumentTypeError(f"must be a whole number (got {text!r})")
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number (got {text!r})") from None


def names(text: str) -> list[str]:
    """One or more comma-separated names (``v100,h100``): an empty value or an empty item (``""``, ``a,,b``)
    is refused, not read as "all of them"."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"must be one or more names, comma-separated (got {text!r})")
    return items


def integer(minimum: int, maximum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            if not text.isascii():  # int() reads other scripts' digits too ("５")
                raise ValueError(text)
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number (got {text!r})") from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"must be from {minimum:,} to {maximum:,} (got {text})")
        return value

    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


def number(minimum: float, maximum: float, open_below: bool = False) -> Callable[[str], float]:
    """A finite number in ``[minimum, maximum]`` (``(minimum, maximum]`` with ``open_below``)."""

    def parse(text: str) -> float:
        try:
            if not text.isascii():
                raise ValueError(text)
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number (got {text!r})") from None
        low_ok = value > minimum if open_below else value >= minimum
        if not (math.isfinite(value) and low_ok and value <= maximum):
            bound = f"more than {minimum:g}" if open_below else f"at least {minimum:g}"
            raise argparse.ArgumentTypeError(
                f"must be a finite number {bound} and at most {maximum:g} (got {text})"
            )
        return value

    parse.__name__ = "number"
    return parse


def objective(text: str):  # -> kernels.objective.Objective
    """``--objective NAME:max|min``: a recorded cache's objective and its direction (``NAME`` alone where the
    direction is known: time and energy lower, GFLOP/s and GB/s higher)."""
    from launchtune.kernels.objective import ObjectiveError, parse_flag

    try:
        return parse_flag(text)
    except ObjectiveError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


objective.__name__ = "objective"
