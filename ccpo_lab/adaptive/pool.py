"""The joint family's pooled-variance t-tests on a live look's scores.

:mod:`ccpo_lab.stats.joint` defines the statistic: comparison ``i``'s mean difference over
a standard error whose variance is pooled over the whole family (paired: the per-seed
differences of every comparison, each over its own pairs; unpaired: every arm's scores).
With ``statistic: mean-or-rank`` the p-value is the maximum test's
(:func:`~ccpo_lab.stats.joint.max_test_p`: that t's or the comparison's ranks'). This
module computes both from a sweep's per-seed scores, exactly as
:func:`ccpo_lab.adaptive.simulate.run_design` does on simulated ones
(``tests/adaptive/test_decide.py`` checks they agree study by study).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray
from scipy import special

from ccpo_lab.stats.compare import _ZERO_SPREAD_ULPS, Comparison
from ccpo_lab.stats.joint import JointVariance, max_test_p, pooled, rank_t

__all__ = ["ArmData", "max_test_comparison", "pooled_comparison", "pooled_spread"]

ArmData = Mapping[str, tuple[NDArray[np.float64], NDArray[np.int64]]]
"""arm -> (values, seed labels) of its seeds with a finite score."""


def _ss(v: NDArray[np.float64]) -> tuple[float, float]:
    """(sum of squared deviations from the mean, n - 1); (0, 0) below 2 values."""
    if v.size < 2:
        return 0.0, 0.0
    return float(np.sum((v - v.mean()) ** 2)), float(v.size - 1)


def _pair(data: ArmData, arm: str, base: str) -> tuple[NDArray[np.float64], ...]:
    x, sx = data[arm]
    y, sy = data[base]
    _, ix, iy = np.intersect1d(sx, sy, assume_unique=True, return_indices=True)
    return x[ix], y[iy]


def pooled_spread(data: ArmData, comparisons: tuple[tuple[str, str], ...], paired: bool
                  ) -> tuple[float, float]:
    """``(variance, df)`` pooled over the family: paired, the per-seed differences of
    every comparison (its common seeds); unpaired, every arm's scores. nan without df."""
    if paired:
        parts = [_ss(x - y) for x, y in (_pair(data, a, b) for a, b in comparisons)]
    else:
        arms = dict.fromkeys(a for pair in comparisons for a in pair)
        parts = [_ss(data[a][0]) for a in arms]
    ss = np.array([p[0] for p in parts])
    dof = np.array([p[1] for p in parts])
    v, df = pooled(ss, dof)
    return float(v), float(df)


def pooled_comparison(c: Comparison, data: ArmData, key: tuple[str, str], v: float,
                      df: float) -> tuple[Comparison, float, float, float]:
    """``c`` tested with the pooled variance ``v`` (``df``): ``(comparison with t, df, p
    and se replaced, se, var_a, var_b)``; p nan where the pooled spread is within rounding
    of the data's magnitude (the report's zero-spread rule) or undefined."""
    nan = float("nan")
    if c.test == "paired":
        x, y = _pair(data, *key)
        n = x.size
        se = float(np.sqrt(v / n)) if n >= 1 else nan
        spread, va, vb = float(np.sqrt(v)), v, 0.0
    else:
        x, y = data[key[0]][0], data[key[1]][0]
        se = float(np.sqrt(v * (1.0 / x.size + 1.0 / y.size))) if x.size and y.size else nan
        spread, va, vb = float(np.sqrt(2.0 * v)), v, v
    scale = max(float(np.max(np.abs(x))) if x.size else 0.0,
                float(np.max(np.abs(y))) if y.size else 0.0)
    ok = (np.isfinite(spread) and np.isfinite(c.diff) and df > 0
          and spread > _ZERO_SPREAD_ULPS * np.finfo(np.float64).eps * scale)
    t = c.diff / se if ok else nan
    p = float(2.0 * special.stdtr(df, -abs(t))) if ok else nan
    out = dataclasses.replace(c, t=t, df=df if ok else nan, p_value=p, se=se)
    return out, se, va, vb


def max_test_comparison(c: Comparison, data: ArmData, key: tuple[str, str],
                        variance: JointVariance = "pooled"
                        ) -> tuple[Comparison, float, float]:
    """``c`` (pooled, :func:`pooled_comparison`, or its own test) with the
    ``mean-or-rank`` p-value: ``(comparison, the ranks' t, its df)``; the ranks of the
    comparison's own two arms (paired: its common seeds' differences; unpaired with
    ``variance: own``: Brunner-Munzel's), nan below 2 values per arm."""
    paired = c.test == "paired"
    x, y = _pair(data, *key) if paired else (data[key[0]][0], data[key[1]][0])
    if min(x.size, y.size) < 2:
        return c, float("nan"), float("nan")
    t_r, df_r = rank_t(x, y, paired, variance=variance)
    p = float(max_test_p(np.float64(c.p_value), np.float64(c.diff), t_r, df_r))
    return dataclasses.replace(c, p_value=p), float(t_r), float(df_r)
