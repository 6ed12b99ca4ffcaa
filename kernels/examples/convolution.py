"""The numpy reference of ``convolution.cu``: what every configuration must compute.

Usable as a kernel spec's ``reference: kernels.examples.convolution:reference`` (arguments in the spec's
order, the answer aligned with them, None where nothing is checked; allowed as any Python a spec names).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def convolve(image: np.ndarray, filter_: np.ndarray) -> np.ndarray:
    """``out[y, x] = sum_ij image[y + i, x + j] * filter[i, j]`` in float64 (a "valid" correlation, the
    kernel's convention: the image carries the filter's border)."""
    windows = sliding_window_view(image.astype(np.float64), filter_.shape)
    return np.einsum("yxij,ij->yx", windows, filter_.astype(np.float64))


def reference(arguments: Sequence[Any], problem_size: Sequence[int]) -> list[Any]:
    """The answer for the spec's arguments (output, input, filter, width, height): the output checked."""
    _, image, filter_, width, height = arguments
    out = convolve(image, filter_)
    assert out.shape == (int(height), int(width))
    return [out.astype(np.float32), None, None, None, None]
