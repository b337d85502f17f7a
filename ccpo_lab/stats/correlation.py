"""How much two arms' scores move together across the seeds they share.

A seed fixes an environment draw, an initialisation and a data order that every arm run on
it shares; when that shared part matters, two arms' per-seed scores are correlated, and the
paired test (per-seed differences) removes it. When it does not, pairing only halves the
degrees of freedom (``n - 1`` instead of ``2 n - 2``). The report shows the correlation
the study observed, with its interval, beside the test the comparison used.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

__all__ = ["seed_correlation"]


def seed_correlation(
    x: ArrayLike, y: ArrayLike, seeds_x: ArrayLike, seeds_y: ArrayLike,
    confidence: float = 0.95,
) -> tuple[float, float, float, int]:
    """Pearson correlation of two arms across their common seeds, with its interval.

    Args:
        x, y: float (n_x,), (n_y,), per-seed scores (nan: missing).
        seeds_x, seeds_y: int, the seed labels of ``x`` and ``y``.
        confidence: of the Fisher-z interval ``tanh(atanh(r) -/+ z / sqrt(n - 3))``.

    Returns:
        ``(r, low, high, n)`` over the ``n`` common seeds with finite scores: r nan below
        3 seeds or without spread; the interval nan below 4 seeds.
    """
    xv, yv = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    _, ix, iy = np.intersect1d(np.asarray(seeds_x), np.asarray(seeds_y), assume_unique=True,
                               return_indices=True)
    a, b = xv[ix], yv[iy]
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    n = int(a.size)
    nan = float("nan")
    if n < 3 or np.std(a) == 0.0 or np.std(b) == 0.0:
        return nan, nan, nan, n
    r = float(np.clip(np.corrcoef(a, b)[0, 1], -1.0, 1.0))
    if n < 4 or abs(r) >= 1.0:
        return r, nan, nan, n
    z = float(special.ndtri(0.5 + confidence / 2.0)) / math.sqrt(n - 3.0)
    return r, math.tanh(math.atanh(r) - z), math.tanh(math.atanh(r) + z), n
