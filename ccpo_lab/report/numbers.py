"""Small helpers every part of the report uses: JSON-safe numbers, rates, RNG streams.

A leaf module (it imports nothing from :mod:`ccpo_lab.report`), so analysis, comparisons,
tables and figures can all use it without importing one another.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

Pair = tuple[float | None, float | None]
"""An interval ``(low, high)``; None where undefined (JSON ``[lo, hi]`` with null)."""

NO_INTERVAL: Pair = (None, None)


def num(x: Any) -> float | None:
    """A finite float, or None (JSON null) for nan/inf/None."""
    if x is None:
        return None
    f = float(x)
    return f if np.isfinite(f) else None


def interval(lo: Any, hi: Any) -> Pair:
    """``(lo, hi)`` with nan as None."""
    return (num(lo), num(hi))


def is_rate(metric: str) -> bool:
    """Whether a metric is a success rate (a fraction; tables show percent)."""
    return metric.endswith("success_rate")


def rng_for(seed: int, *names: str) -> np.random.Generator:
    """A Generator fixed by ``seed`` and ``names`` (e.g. an arm, or a comparison), so
    every bootstrap stream is reproducible and independent of the others."""
    return np.random.default_rng([int(seed), *(zlib.crc32(n.encode("utf-8")) for n in names)])


def arm_rng(seed: int, arm: str) -> np.random.Generator:
    """The Generator of one arm's bootstrap: fixed by (seed, arm), independent of others."""
    return rng_for(seed, arm)
