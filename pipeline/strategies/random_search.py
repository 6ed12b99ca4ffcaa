"""Plain random sampling: the baseline every other strategy must beat (no model)."""

from __future__ import annotations

from .base import Session


def tune(session: Session) -> None:
    session.measure_random(session.budget)
