"""Comparisons of an arm X against a reference arm Y, and Holm's correction.

The difference is always ``X - Y`` (positive: X better when higher is better).

Test choice (:func:`compare_arms`): when seed labels are given for both arms and
at least two seeds are present in both, a paired t-test on the per-seed
differences of those common seeds (arms that share a seed share hardware
layout, batch and data order, so pairing removes the seed effect); otherwise
Welch's unequal-variance t-test on all seeds.

Degenerate cases never raise and never give inf: fewer than two values on a
side (or fewer than two pairs), or a zero spread (all paired differences equal,
or both arms constant), give ``p_value``, ``ci_low``, ``ci_high``, ``t`` and
``df`` nan. ``diff`` is still reported whenever both arms have a value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from ccpo_lab.stats.checks import check_confidence

__all__ = ["Comparison", "compare_arms", "compare_summaries", "holm"]

Test = Literal["paired", "welch"]

# A spread below this many ulps of the data's magnitude is rounding noise: treat it as zero
# (otherwise 0.9-0.8, 0.8-0.7, 0.7-0.6 would give t ~ 1e15 and p = 0).
_ZERO_SPREAD_ULPS = 64.0


@dataclass(frozen=True)
class Comparison:
    """Result of comparing arm X with reference arm Y.

    Attributes:
        diff: estimated ``X - Y``: mean of per-seed differences over the common seeds
            (paired) or ``mean(X) - mean(Y)`` (Welch); nan if a side has no value.
        ci_low, ci_high: t-interval of ``diff`` at ``confidence``; nan when degenerate.
        p_value: two-sided p of ``diff == 0``; nan when degenerate.
        t: the t statistic; nan when degenerate.
        df: degrees of freedom (``n_pairs - 1`` paired; Welch-Satterthwaite otherwise).
        test: 'paired' or 'welch'.
        n_x, n_y: non-nan seeds of X and Y (all of them, paired or not).
        n_pairs: seeds present in both (0 when seed labels were not given).
        confidence: level of the interval.
        se: standard error of ``diff`` under the test (``sd_diff / sqrt(n_pairs)`` paired,
            Welch's otherwise); nan when degenerate.
        sd_diff: sd (ddof=1) of the per-seed differences over the common seeds (paired
            test); nan for Welch. The power of the paired test (seeds needed, minimal
            detectable difference) comes from it, not from each arm's sd.
    """

    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    t: float
    df: float
    test: Test
    n_x: int
    n_y: int
    n_pairs: int
    confidence: float
    se: float = float("nan")
    sd_diff: float = float("nan")


def _arm(
    values: ArrayLike, seeds: ArrayLike | None, name: str
) -> tuple[NDArray[np.float64], NDArray[np.int64] | None]:
    """Validate one arm; drop nan values (with their seeds). Shapes: (n,), (n,)."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one value per seed), got shape {v.shape}")
    if np.isinf(v).any():
        raise ValueError(f"{name} must be finite or nan, got inf")
    keep = ~np.isnan(v)
    if seeds is None:
        return v[keep], None
    s = np.asarray(seeds)
    if s.shape != v.shape:
        raise ValueError(f"seeds of {name} must have shape {v.shape}, got {s.shape}")
    s = s.astype(np.int64)
    if np.unique(s).size != s.size:
        raise ValueError(f"seeds of {name} must be unique, got {s.tolist()}")
    return v[keep], s[keep]


def _zero_spread(sd: float, data: NDArray[np.float64]) -> bool:
    scale = float(np.max(np.abs(data))) if data.size else 0.0
    return bool(not np.isfinite(sd) or sd <= _ZERO_SPREAD_ULPS * np.finfo(np.float64).eps * scale)


def _result(
    diff: float, se: float, df: float, test: Test, n_x: int, n_y: int, n_pairs: int, c: float,
    sd_diff: float = float("nan"),
) -> Comparison:
    """Assemble a Comparison from diff, its se and df (se/df nan when degenerate)."""
    nan = float("nan")
    if not (np.isfinite(se) and se > 0.0 and np.isfinite(df) and df > 0.0):
        return Comparison(diff, nan, nan, nan, nan, nan, test, n_x, n_y, n_pairs, c, nan,
                          nan)
    t = float(diff / se)
    p = float(2.0 * special.stdtr(df, -abs(t)))  # t.sf(|t|, df)
    half = float(special.stdtrit(df, 0.5 + c / 2.0) * se)  # t.ppf
    return Comparison(float(diff), float(diff - half), float(diff + half), p, t, float(df), test,
                      n_x, n_y, n_pairs, c, float(se), float(sd_diff))


def _welch_parts(
    mean_x: float, var_x: float, n_x: int, mean_y: float, var_y: float, n_y: int
) -> tuple[float, float]:
    """Welch se and df from per-arm means, variances (ddof=1) and counts; nan if degenerate."""
    if n_x < 2 or n_y < 2:
        return float("nan"), float("nan")
    a, b = var_x / n_x, var_y / n_y
    se2 = a + b
    if not se2 > 0.0:
        return float("nan"), float("nan")
    df = se2 * se2 / (a * a / (n_x - 1) + b * b / (n_y - 1))
    return float(np.sqrt(se2)), float(df)


def compare_arms(
    x: ArrayLike,
    y: ArrayLike,
    seeds_x: ArrayLike | None = None,
    seeds_y: ArrayLike | None = None,
    confidence: float = 0.95,
) -> Comparison:
    """Compare arm X with reference Y: paired by seed when possible, Welch otherwise.

    Args:
        x: float (n_x,), one value per seed of X (normally its window mean); nan = missing.
        y: float (n_y,), the same for the reference Y.
        seeds_x: int (n_x,), seed label of each entry of ``x``, unique; optional.
        seeds_y: int (n_y,), seed labels of ``y``; optional.
        confidence: level of the interval of the difference, in (0, 1).

    Returns:
        :class:`Comparison`. Paired t-test (``scipy.stats.ttest_rel`` on the common
        seeds) when both seed arrays are given and >= 2 non-nan seeds are common;
        Welch (``scipy.stats.ttest_ind(equal_var=False)``) otherwise. Seeds present in
        only one arm do not enter a paired test (they still count in ``n_x``/``n_y``).

    Raises:
        ValueError: on malformed input (not 1-D, seeds of another length, duplicate
            seeds, inf values). Degenerate data never raises (see the module doc).
    """
    c = check_confidence(confidence)
    vx, sx = _arm(x, seeds_x, "x")
    vy, sy = _arm(y, seeds_y, "y")
    n_x, n_y = int(vx.size), int(vy.size)
    nan = float("nan")

    if sx is not None and sy is not None:
        common, ix, iy = np.intersect1d(sx, sy, assume_unique=True, return_indices=True)
        n_pairs = int(common.size)
        if n_pairs >= 2:
            d = vx[ix] - vy[iy]
            diff = float(np.mean(d))
            sd = float(np.std(d, ddof=1))
            if _zero_spread(sd, np.concatenate([vx[ix], vy[iy]])):
                return _result(diff, nan, nan, "paired", n_x, n_y, n_pairs, c)
            return _result(diff, sd / np.sqrt(n_pairs), n_pairs - 1.0, "paired", n_x, n_y,
                           n_pairs, c, sd)
    else:
        n_pairs = 0

    diff = float(np.mean(vx) - np.mean(vy)) if n_x and n_y else nan
    if n_x < 2 or n_y < 2:
        return _result(diff, nan, nan, "welch", n_x, n_y, n_pairs, c)
    var_x, var_y = float(np.var(vx, ddof=1)), float(np.var(vy, ddof=1))
    if _zero_spread(np.sqrt(var_x + var_y), np.concatenate([vx, vy])):
        return _result(diff, nan, nan, "welch", n_x, n_y, n_pairs, c)
    se, df = _welch_parts(float(np.mean(vx)), var_x, n_x, float(np.mean(vy)), var_y, n_y)
    return _result(diff, se, df, "welch", n_x, n_y, n_pairs, c)


def compare_summaries(
    mean_x: float,
    sd_x: float,
    n_x: int,
    mean_y: float,
    sd_y: float,
    n_y: int,
    confidence: float = 0.95,
) -> Comparison:
    """Welch comparison from per-arm summaries (mean, sd ddof=1, n), e.g. published tables.

    Matches ``scipy.stats.ttest_ind_from_stats(..., equal_var=False)``.

    Args:
        mean_x, sd_x, n_x: mean, sd across seeds and seed count of X.
        mean_y, sd_y, n_y: the same for the reference Y.
        confidence: level of the interval, in (0, 1).

    Returns:
        :class:`Comparison` with test 'welch' and n_pairs 0. ``diff`` is nan if a mean
        is nan or a count is 0; p/CI/t/df are nan if a count is < 2, an sd is nan or
        negative, or both sds are 0.
    """
    c = check_confidence(confidence)
    n_x, n_y = int(n_x), int(n_y)
    nan = float("nan")
    diff = float(mean_x - mean_y) if n_x > 0 and n_y > 0 else nan
    sds_ok = np.isfinite(sd_x) and np.isfinite(sd_y) and sd_x >= 0.0 and sd_y >= 0.0
    if not sds_ok or not np.isfinite(diff):
        return _result(diff, nan, nan, "welch", n_x, n_y, 0, c)
    se, df = _welch_parts(mean_x, sd_x * sd_x, n_x, mean_y, sd_y * sd_y, n_y)
    return _result(diff, se, df, "welch", n_x, n_y, 0, c)


def holm(p_values: ArrayLike) -> NDArray[np.float64]:
    """Holm-Bonferroni adjusted p-values (step-down, family-wise error control).

    With the ``m`` non-nan p-values sorted ascending ``p_(1) <= ... <= p_(m)``, the
    adjusted value is ``min(1, max_{j <= i} (m - j + 1) p_(j))``. Reject at level
    alpha exactly where the adjusted value is < alpha (or <=, as one prefers).

    nan rule: a nan p-value (a comparison that could not be tested) stays nan and is
    *not* counted in ``m`` -- an untestable comparison makes no claim, so it costs
    no alpha. Ties keep their input order (the adjustment is the same either way).

    Args:
        p_values: float, any shape (typically (n_comparisons,)), values in [0, 1] or nan.

    Returns:
        float array of the same shape.

    Raises:
        ValueError: if a non-nan p-value is outside [0, 1].
    """
    p = np.asarray(p_values, dtype=np.float64)
    flat = p.ravel()
    out = np.full(flat.shape, np.nan)
    ok = ~np.isnan(flat)
    vals = flat[ok]
    if np.any((vals < 0.0) | (vals > 1.0)):
        raise ValueError(f"p-values must be in [0, 1], got {vals.tolist()}")
    m = vals.size
    if m:
        order = np.argsort(vals, kind="stable")
        scaled = (m - np.arange(m)) * vals[order]
        adj = np.minimum(np.maximum.accumulate(scaled), 1.0)
        res = np.empty(m)
        res[order] = adj
        out[ok] = res
    return out.reshape(p.shape)
