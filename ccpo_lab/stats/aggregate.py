"""Per-arm aggregates: over seeds of one arm, and over (runs, tasks) score matrices.

Two kinds of input:

* ``x: float (n_seeds,)`` -- one number per seed of an arm, normally the seed's
  converged-window mean (:func:`ccpo_lab.stats.window_summary`). nan entries are
  missing seeds: dropped, not counted in ``n``.
* ``scores: float (..., runs, tasks)`` -- the rliable layout: ``scores[r, t]`` is
  run ``r``'s score on task ``t`` (e.g. the six ALFWorld task types). The
  aggregate metrics reduce the last two axes and keep any leading batch axes,
  so the same function serves the point estimate (shape ``(runs, tasks)`` ->
  ``()``) and a batch of bootstrap resamples (``(reps, runs, tasks)`` ->
  ``(reps,)``). nan anywhere in a matrix makes that matrix's aggregate nan.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from ccpo_lab.stats.checks import check_confidence

__all__ = [
    "ArmSummary",
    "aggregate_iqm",
    "aggregate_mean",
    "aggregate_median",
    "aggregate_optimality_gap",
    "finite_values",
    "summarize_arm",
    "t_interval",
]


@dataclass(frozen=True)
class ArmSummary:
    """Mean over seeds of one arm with a t-interval.

    Attributes:
        n: number of non-nan seeds.
        mean: mean over seeds; nan if ``n == 0``.
        sd: sd across seeds (ddof=1); nan if ``n < 2``.
        se: ``sd / sqrt(n)``; nan if ``n < 2``.
        ci_low, ci_high: t-interval ``mean -/+ t_{(1+c)/2, n-1} * se``; nan if ``n < 2``.
            A zero sd gives the zero-width interval ``[mean, mean]``.
        confidence: the level ``c`` of the interval.
    """

    n: int
    mean: float
    sd: float
    se: float
    ci_low: float
    ci_high: float
    confidence: float


def finite_values(x: ArrayLike) -> NDArray[np.float64]:
    """The non-nan entries of a 1-D array as float64. Shape: (n,) -> (m,), m <= n.

    Raises:
        ValueError: if ``x`` is not 1-D, or holds +/-inf.
    """
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"expected a 1-D array of per-seed values, got shape {a.shape}")
    a = a[~np.isnan(a)]
    if np.any(np.isinf(a)):
        raise ValueError("per-seed values must be finite or nan, got inf")
    return a


def t_interval(x: ArrayLike, confidence: float = 0.95) -> tuple[float, float]:
    """Student-t interval for the mean of ``x``.

    Args:
        x: float (n,), per-seed values; nan entries are dropped.
        confidence: level in (0, 1).

    Returns:
        ``(low, high)``; ``(nan, nan)`` if fewer than two non-nan values.
    """
    s = summarize_arm(x, confidence)
    return s.ci_low, s.ci_high


def summarize_arm(x: ArrayLike, confidence: float = 0.95) -> ArmSummary:
    """Mean, sd across seeds (ddof=1), se and t-interval of one arm.

    Args:
        x: float (n_seeds,), one value per seed (normally its converged-window
            mean); nan entries are missing seeds and are dropped.
        confidence: level of the t-interval, in (0, 1).

    Returns:
        :class:`ArmSummary` (see its nan rules).
    """
    c = check_confidence(confidence)
    a = finite_values(x)
    n = int(a.size)
    nan = float("nan")
    if n == 0:
        return ArmSummary(n=0, mean=nan, sd=nan, se=nan, ci_low=nan, ci_high=nan, confidence=c)
    mean = float(np.mean(a))
    if n < 2:
        return ArmSummary(n=n, mean=mean, sd=nan, se=nan, ci_low=nan, ci_high=nan, confidence=c)
    sd = float(np.std(a, ddof=1))
    se = sd / np.sqrt(n)
    half = float(special.stdtrit(n - 1, 0.5 + c / 2.0)) * se
    return ArmSummary(
        n=n, mean=mean, sd=sd, se=float(se), ci_low=mean - half, ci_high=mean + half, confidence=c
    )


def _scores(scores: ArrayLike) -> NDArray[np.float64]:
    a = np.asarray(scores, dtype=np.float64)
    if a.ndim < 2:
        raise ValueError(f"scores must have shape (..., runs, tasks), got {a.shape}")
    if a.shape[-2] == 0 or a.shape[-1] == 0:
        raise ValueError(f"scores must have at least one run and one task, got {a.shape}")
    return a


def _as_result(r: NDArray[np.float64]) -> NDArray[np.float64] | float:
    return float(r) if np.ndim(r) == 0 else r


def aggregate_mean(scores: ArrayLike) -> NDArray[np.float64] | float:
    """Mean over tasks of the per-task mean over runs (rliable's ``aggregate_mean``).

    Args:
        scores: float (..., runs, tasks).

    Returns:
        float for a 2-D input, else float array (...). nan if the matrix holds nan.
    """
    a = _scores(scores)
    return _as_result(a.mean(axis=-2).mean(axis=-1))


def aggregate_median(scores: ArrayLike) -> NDArray[np.float64] | float:
    """Median over tasks of the per-task mean over runs (rliable's ``aggregate_median``).

    Args:
        scores: float (..., runs, tasks).

    Returns:
        float for a 2-D input, else float array (...). nan if the matrix holds nan.
    """
    a = _scores(scores)
    return _as_result(np.median(a.mean(axis=-2), axis=-1))


def aggregate_iqm(scores: ArrayLike) -> NDArray[np.float64] | float:
    """Interquartile mean: 25% trimmed mean pooled over all runs x tasks (rliable).

    Equals ``scipy.stats.trim_mean(scores.ravel(), 0.25)`` for a 2-D input (up to
    float summation order): the ``floor(0.25 * runs * tasks)`` lowest and highest
    scores are cut and the rest averaged.

    Args:
        scores: float (..., runs, tasks).

    Returns:
        float for a 2-D input, else float array (...). nan if the matrix holds nan.
    """
    a = _scores(scores)
    flat = a.reshape(*a.shape[:-2], -1)
    n = flat.shape[-1]
    cut = int(0.25 * n)  # as scipy.stats.trim_mean; a full sort of short rows beats partition
    iqm = np.sort(flat, axis=-1)[..., cut : n - cut].mean(axis=-1)
    has_nan = np.isnan(flat).any(axis=-1)
    return _as_result(np.where(has_nan, np.nan, iqm))


def aggregate_optimality_gap(
    scores: ArrayLike, gamma: float = 1.0
) -> NDArray[np.float64] | float:
    """Optimality gap: ``gamma - mean(min(scores, gamma))`` over all runs x tasks (rliable).

    Args:
        scores: float (..., runs, tasks); success rates in [0, 1] with the default
            ``gamma`` (use ``gamma=100`` for percentages).
        gamma: the target score; scores above it count as ``gamma``.

    Returns:
        float for a 2-D input, else float array (...). Lower is better. nan if the
        matrix holds nan.
    """
    a = _scores(scores)
    return _as_result(gamma - np.minimum(a, gamma).mean(axis=(-2, -1)))
