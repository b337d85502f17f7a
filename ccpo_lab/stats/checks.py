"""Argument checks shared by the statistics modules (one definition each).

Every function returns the checked value in its canonical type and raises ``ValueError``
(``TypeError`` for a non-Generator ``rng``) with the argument's name and value.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_confidence", "check_reps", "check_rng", "check_unit"]


def check_unit(value: float, name: str) -> float:
    """``value`` as a float strictly between 0 and 1 (a level, a power, a confidence)."""
    v = float(value)
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return v


def check_confidence(confidence: float) -> float:
    """The confidence level of an interval, in (0, 1)."""
    return check_unit(confidence, "confidence")


def check_rng(rng: object) -> np.random.Generator:
    """An explicit ``numpy.random.Generator`` (global RNGs are never used)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            "rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )
    return rng


def check_reps(n_reps: int) -> int:
    """A number of bootstrap resamples, >= 1."""
    if int(n_reps) < 1:
        raise ValueError(f"n_reps must be >= 1, got {n_reps!r}")
    return int(n_reps)
