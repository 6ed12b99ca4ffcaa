"""The fourth round's attacks (issue 54), replayed through the CLI and the Python API: each answered with one
line (exit code 2) or a named exception, nothing lost, nothing hung. The cases each fix owns live beside it;
this file keeps the attacker's commands together so a regression shows where the round found it."""

from __future__ import annotations

import os

from hypothesis import settings


def test_make_test_draws_the_same_examples_on_every_run():
    """CI that cannot fail at random: the profile ``make test`` loads is derandomised, with no example
    database that a previous run could have filled (``make fuzz`` loads the random one)."""
    if os.environ.get("LAUNCHTUNE_HYPOTHESIS_PROFILE", "ci") != "ci":
        assert not settings.default.derandomize  # make fuzz: fresh randomness
        return
    assert settings.default.derandomize and settings.default.database is None
