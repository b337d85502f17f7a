"""Per-run summaries of one held-out evaluation series.

A *run* is one (arm, seed) training job. Its held-out evaluations form a series
``steps: int (n,)`` and ``values: float (n,)`` (e.g. ``val/success_rate`` every
``trainer.test_freq`` steps). The number to report for a run is the
*converged-window mean*: the mean of the evaluations at ``step >= window_start``
(70 in the ALFWorld protocol), with its sd and count ``n``. The best single
evaluation is reported only together with the upward bias that a maximum of
``n`` noisy draws carries.

nan convention: an evaluation whose value is nan is treated as missing. It is
dropped before anything is computed and is not counted in ``n``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

__all__ = [
    "BestEvaluation",
    "Rise",
    "WindowSummary",
    "best_evaluation",
    "binomial_se",
    "expected_max_normal",
    "is_interim",
    "rise_over_start",
    "window_summary",
]


@dataclass(frozen=True)
class WindowSummary:
    """Converged-window summary of one run.

    Attributes:
        mean: mean of the evaluations with ``step >= window_start``; nan if ``n == 0``.
        sd: their sample sd (ddof=1); nan if ``n < 2``.
        n: number of (non-nan) evaluations in the window.
        window_start: the first step that counts.
    """

    mean: float
    sd: float
    n: int
    window_start: int


@dataclass(frozen=True)
class BestEvaluation:
    """The best single evaluation of a run and how optimistic it is.

    Attributes:
        step: step of the maximum (the earliest one on ties); -1 if ``n == 0``.
        value: the maximum value; nan if ``n == 0``.
        n: number of (non-nan) evaluations it was the maximum of.
        bias_sd_units: expected maximum of ``n`` iid N(0, 1) draws
            (:func:`expected_max_normal`): how many sds a maximum of ``n`` pure-noise
            evaluations lies above their mean. 0 for ``n == 1``, nan for ``n == 0``.
        bias: ``bias_sd_units * sd`` where ``sd`` is the sd (ddof=1) of the same
            ``n`` evaluations, in value units; nan if ``n < 2``.
    """

    step: int
    value: float
    n: int
    bias_sd_units: float
    bias: float


def _series(steps: ArrayLike, values: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Validate a series and drop its nan values. Shapes: (n,), (n,) -> (m,), (m,)."""
    s = np.asarray(steps)
    v = np.asarray(values, dtype=np.float64)
    if s.ndim != 1 or v.ndim != 1 or s.shape != v.shape:
        raise ValueError(
            f"steps and values must be 1-D of equal length, got {s.shape} and {v.shape}"
        )
    non_int = s.size > 0 and not np.issubdtype(s.dtype, np.integer)
    if non_int and (not np.all(np.isfinite(s)) or np.any(s != np.round(s))):
        raise ValueError("steps must be integers")
    keep = ~np.isnan(v)
    return s[keep].astype(np.int64), v[keep]


def _mean_sd(v: NDArray[np.float64]) -> tuple[float, float]:
    """Mean and sd (ddof=1) of a 1-D array; nan where undefined. Shape: (n,)."""
    mean = float(np.mean(v)) if v.size else float("nan")
    sd = float(np.std(v, ddof=1)) if v.size >= 2 else float("nan")
    return mean, sd


def window_summary(steps: ArrayLike, values: ArrayLike, window_start: int) -> WindowSummary:
    """Mean, sd and count of the evaluations at ``step >= window_start``.

    Args:
        steps: int (n,), the training step of each evaluation (any order).
        values: float (n,), the evaluation values (e.g. success rate in [0, 1]);
            nan values are dropped.
        window_start: first step of the converged window (inclusive; no default here:
            the analysis settings own it, :class:`ccpo_lab.config.analysis.RunScore`).

    Returns:
        :class:`WindowSummary`; ``mean`` is nan when no evaluation is in the window,
        ``sd`` is nan when fewer than two are.

    Raises:
        ValueError: if the arrays are not 1-D of equal length or steps are not integers.
    """
    s, v = _series(steps, values)
    w = v[s >= window_start]
    mean, sd = _mean_sd(w)
    return WindowSummary(mean=mean, sd=sd, n=int(w.size), window_start=int(window_start))


_GRID = np.linspace(-12.0, 12.0, 24_001)
"""Integration grid: the integrand is < 1e-30 outside [-12, 12] for any n <= 1e6."""


@lru_cache(maxsize=1024)
def _expected_max_normal_cached(n: int) -> float:
    # E[max of n iid N(0,1)] = int x * n * phi(x) * Phi(x)^(n-1) dx over the real line, by
    # the trapezoidal rule, which converges geometrically for a smooth integrand that
    # vanishes at both ends (error far below 1e-9 at this spacing).
    x = _GRID
    log_pdf = -0.5 * x * x - 0.5 * np.log(2.0 * np.pi)
    f = x * n * np.exp(log_pdf + (n - 1) * special.log_ndtr(x))
    h = x[1] - x[0]
    return float(h * (f.sum() - 0.5 * (f[0] + f[-1])))


def expected_max_normal(n: int) -> float:
    """Expected maximum of ``n`` iid standard normal draws, by numerical integration.

    ``E[max] = integral of x * n * phi(x) * Phi(x)**(n-1) dx``. Exact values for
    checking: n=1 -> 0, n=2 -> 1/sqrt(pi) = 0.5642, n=3 -> 3/(2 sqrt(pi)) = 0.8463;
    n=9 -> 1.4850 (the "about 1.5 sd" of the protocol).

    Args:
        n: number of draws (int).

    Returns:
        The expectation in sd units; 0.0 for ``n == 1``, nan for ``n < 1``.
    """
    n = int(n)
    if n < 1:
        return float("nan")
    if n == 1:
        return 0.0
    return _expected_max_normal_cached(n)


def best_evaluation(
    steps: ArrayLike, values: ArrayLike, window_start: int | None = None
) -> BestEvaluation:
    """The maximum evaluation of a run, with the upward bias expected of a maximum.

    Args:
        steps: int (n,), step of each evaluation.
        values: float (n,), evaluation values; nan values are dropped.
        window_start: if given, only evaluations with ``step >= window_start`` are
            considered (use the converged-window start to report "best of the
            window" next to the window mean); ``None`` considers all evaluations.

    Returns:
        :class:`BestEvaluation`. With no evaluation: step -1, value nan, n 0,
        bias_sd_units nan, bias nan. With one: bias_sd_units 0.0, bias nan.
    """
    s, v = _series(steps, values)
    if window_start is not None:
        keep = s >= window_start
        s, v = s[keep], v[keep]
    n = int(v.size)
    if n == 0:
        nan = float("nan")
        return BestEvaluation(step=-1, value=nan, n=0, bias_sd_units=nan, bias=nan)
    order = np.lexsort((s, -v))  # highest value first, earliest step on ties
    i = int(order[0])
    bias_sd = expected_max_normal(n)
    _, sd = _mean_sd(v)
    return BestEvaluation(
        step=int(s[i]), value=float(v[i]), n=n, bias_sd_units=bias_sd, bias=bias_sd * sd
    )


def binomial_se(p: ArrayLike, k: ArrayLike) -> NDArray[np.float64] | float:
    """Binomial standard error of one evaluation: ``sqrt(p (1 - p) / k)``.

    One 128-episode evaluation at p = 0.9 has se 0.0265, i.e. about +/-5 points at
    95% (1.96 se).

    Args:
        p: success rate(s) as fractions in [0, 1]; any shape, broadcast with ``k``.
        k: episode count(s) per evaluation (> 0); any shape.

    Returns:
        The se as a fraction (multiply by 100 for points); a Python float when both
        inputs are scalars, else an array of the broadcast shape. nan where p is nan
        or outside [0, 1], or where k <= 0 or is nan.
    """
    p_arr = np.asarray(p, dtype=np.float64)
    k_arr = np.asarray(k, dtype=np.float64)
    valid = (p_arr >= 0.0) & (p_arr <= 1.0) & (k_arr > 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.where(valid, np.sqrt(np.clip(p_arr * (1.0 - p_arr), 0.0, None) / k_arr), np.nan)
    return float(se) if se.ndim == 0 else se


def is_interim(steps: ArrayLike, final_step: int) -> bool:
    """Whether a run is still interim: its last evaluated step is before ``final_step``.

    Args:
        steps: int (n,), the evaluated steps (any order); an empty series is interim.
        final_step: the step at which the run is complete (e.g. ``total_epochs``).

    Returns:
        ``max(steps) < final_step`` (True for an empty series).
    """
    s = np.asarray(steps)
    if s.ndim != 1:
        raise ValueError(f"steps must be 1-D, got shape {s.shape}")
    return bool(s.size == 0 or int(np.max(s)) < int(final_step))


@dataclass(frozen=True)
class Rise:
    """How far the converged window lies above the first evaluation, over seeds.

    Attributes:
        start: mean over seeds of the first evaluation (before training: step 0).
        window: mean over the same seeds of the converged-window means.
        rise: ``window - start`` (the mean of the per-seed differences).
        se: binomial standard error of ``rise`` from the evaluations' own sampling
            noise alone (see :func:`rise_over_start`); nan without episode counts.
        z: ``rise / se``; nan when ``se`` is nan or 0.
        n_seeds: seeds with both a first evaluation and a window mean.
        n_rose: how many of them have a window mean above their first evaluation.
    """

    start: float
    window: float
    rise: float
    se: float
    z: float
    n_seeds: int
    n_rose: int


def rise_over_start(start: ArrayLike, window: ArrayLike, episodes: ArrayLike,
                    window_evals: ArrayLike) -> Rise:
    """The rise of the converged window over the first evaluation, against binomial noise.

    Per seed ``s`` the difference ``d_s = w_s - p_s`` of its window mean ``w_s`` (the mean
    of ``m_s`` evaluations) and its first evaluation ``p_s``, each evaluation ``k_s``
    episodes, has binomial variance ``p_s (1 - p_s) / k_s + w_s (1 - w_s) / (k_s m_s)``
    (the window's evaluations taken as independent draws); ``rise`` is the mean of the
    ``d_s`` and ``se`` the square root of the summed variances over the number of seeds.
    This is only the evaluation noise: it says whether the policy changed, not whether
    another training seed would change it as much (that is the spread across seeds).

    Args:
        start: float (seeds,), first evaluations as fractions in [0, 1].
        window: float (seeds,), converged-window means.
        episodes: float (seeds,), episodes per evaluation ``k_s`` (nan: unknown).
        window_evals: int (seeds,), evaluations in each window ``m_s``.

    Returns:
        A :class:`Rise`; seeds with a nan start or window (or no window evaluation) are
        left out; all fields nan (counts 0) when none is left.

    Example: start (0.2, 0.3), window (0.5, 0.4), 100 episodes, 4 and 1 window
    evaluations: rise 0.2, se sqrt(0.002225 + 0.0045) / 2 = 0.0410, z 4.88, 2 of 2 rose.
    """
    p = np.asarray(start, dtype=np.float64).reshape(-1)
    w = np.asarray(window, dtype=np.float64).reshape(-1)
    k = np.asarray(episodes, dtype=np.float64).reshape(-1)
    m = np.asarray(window_evals, dtype=np.float64).reshape(-1)
    if not p.shape == w.shape == k.shape == m.shape:
        raise ValueError(f"start, window, episodes and window_evals must have one shape, got "
                         f"{p.shape}, {w.shape}, {k.shape}, {m.shape}")
    ok = ~np.isnan(p) & ~np.isnan(w) & (m > 0)
    p, w, k, m = p[ok], w[ok], k[ok], m[ok]
    n = int(p.size)
    if n == 0:
        nan = float("nan")
        return Rise(nan, nan, nan, nan, nan, 0, 0)
    d = w - p
    var = np.asarray(binomial_se(p, k)) ** 2 + np.asarray(binomial_se(w, k * m)) ** 2
    se = float(np.sqrt(var.sum()) / n)
    rise = float(d.mean())
    z = rise / se if se > 0 else float("nan")
    return Rise(float(p.mean()), float(w.mean()), rise, se, z, n, int((d > 0).sum()))
