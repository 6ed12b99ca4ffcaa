"""2D finite-volume Euler solver (the SENSEI supersonic-inlet case) with seven tunable CUDA kernels."""

from .physics import KERNEL_NAMES
from .solver import Scheme, Solver

__all__ = ["KERNEL_NAMES", "Scheme", "Solver"]
