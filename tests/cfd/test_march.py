"""The CFD command's time loop (``kernels/cfd/cli.py``): residual rows; a diverged run ends in one line."""

from __future__ import annotations

import argparse

import numpy as np

from launchtune.kernels.cfd.cli import _march


class _Backend:
    def synchronize(self) -> None:
        pass


class _Solver:
    backend = _Backend()


def _ns(steps: int) -> argparse.Namespace:
    return argparse.Namespace(steps=steps, residual_every=2)


def test_the_rows_are_residuals_relative_to_the_first():
    norms = iter([np.full(4, 2.0), np.full(4, 1.0), np.full(4, 0.5)])
    marched = _march(_ns(5), _Solver(), lambda residuals: next(norms) if residuals else None)
    assert marched is not None
    rows, wall = marched
    assert [r[0] for r in rows] == [0, 2, 4] and wall >= 0
    assert rows[-1][1:5] == [0.5] * 4 and rows[-1][5:9] == [0.25] * 4


def test_a_diverged_run_stops_with_one_line(capsys):
    norms = iter([np.full(4, 1.0), np.array([1.0, np.nan, 1.0, 1.0])])
    assert _march(_ns(10), _Solver(), lambda residuals: next(norms) if residuals else None) is None
    assert "error: the solution diverged (residual not finite) at step 2" in capsys.readouterr().err
