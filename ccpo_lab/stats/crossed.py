"""An arm against a fixed policy on common games: seeds x games crossed, paired by game.

A reference policy (a released checkpoint, the base model) is one policy, not a training
procedure with seeds: the pairing that exists between it and an arm is the game (and, on
ccpo-lab's common draw, the sampling stream of each seed, so the two share random numbers
episode by episode). With ``z[s, g] = x[s, g] - y[s, g]`` (the arm's seed ``s`` and the
reference on seed ``s``'s stream, each averaged over the repeats of game ``g``), the
difference is ``D = mean(z)`` and, seeds and games both random (the two-way random model
``z = mu + a_s + b_g + e_sg``),

    Var(D) = s2_a / k + s2_b / N + s2_e / (k N)  =  E[MS_S + MS_G - MS_SG] / (k N)

with the two-way ANOVA mean squares (Searle, Casella & McCulloch 1992, *Variance
Components*, ch. 4). It is estimated in two non-negative parts, the seeds'
``MS_S / (k N)`` (``s2_a / k + s2_e / (k N)``) and the games' ``max(MS_G - MS_SG, 0) /
(k N)`` (``s2_b / N``), and the t reference has ``k - 1`` degrees of freedom, the seeds'
(as the arms' own intervals). In simulation (``tests/stats/test_crossed.py``: 2, 3 and 10
seeds x 40-48 games, Bernoulli episodes) it covers 95.8-96.8% at 95%; Satterthwaite's
degrees of freedom for the same sum covered 91.0% at 2 seeds and 93.9% at 3, and over
``MS_S + MS_G - MS_SG`` with its negative term they can fall to a fraction of one (an
interval millions wide). One seed (``k = 1``): the seeds' spread is unknown, the interval
covers the games only and is marked so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CrossedComparison:
    """``D = mean(x - y)`` over seeds x games, with its interval and test."""

    diff: float
    """``D``."""
    se: float
    """Its standard error."""
    df: float
    """Degrees of freedom of the t reference (``k - 1``; ``N - 1`` with one seed)."""
    ci_low: float
    ci_high: float
    p_value: float
    """Two-sided."""
    n_seeds: int
    """``k``."""
    n_games: int
    """``N``."""
    method: str
    """``seeds x games``, ``seeds x games (game part 0)`` (the games' part estimated
    negative, set to 0) or ``games only (one seed)``."""


def mean_squares(z: np.ndarray) -> tuple[float, float, float]:
    """``(MS_S, MS_G, MS_SG)`` of a (k, N) table (k, N >= 2), one value per cell."""
    k, n = z.shape
    grand = z.mean()
    rows = z.mean(axis=1, keepdims=True)
    cols = z.mean(axis=0, keepdims=True)
    ms_s = n * float(((rows - grand) ** 2).sum()) / (k - 1)
    ms_g = k * float(((cols - grand) ** 2).sum()) / (n - 1)
    ms_sg = float(((z - rows - cols + grand) ** 2).sum()) / ((k - 1) * (n - 1))
    return ms_s, ms_g, ms_sg


def compare_crossed(x: np.ndarray, y: np.ndarray, confidence: float = 0.95
                    ) -> CrossedComparison:
    """An arm (``x``) against a fixed policy (``y``) on the same games.

    Args:
        x: (k, N) the arm's seeds x games (success averaged over each game's repeats).
        y: (k, N) the reference on the same seeds' streams and games.
        confidence: of the interval.

    Raises:
        ValueError: shapes differ, or fewer than 2 games.
    """
    from scipy import stats

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 2:
        raise ValueError(f"x {x.shape} and y {y.shape} must be the same (seeds, games)")
    k, n = x.shape
    if n < 2 or k < 1:
        raise ValueError(f"need >= 1 seed and >= 2 games, got {x.shape}")
    z = x - y
    diff = float(z.mean())
    if k == 1:
        var, df, method = float(z[0].var(ddof=1)) / n, float(n - 1), "games only (one seed)"
    else:
        ms_s, ms_g, ms_sg = mean_squares(z)
        games = max(ms_g - ms_sg, 0.0)
        var = (ms_s + games) / (k * n)
        df = float(k - 1)
        method = "seeds x games" if ms_g >= ms_sg else "seeds x games (game part 0)"
    se = float(np.sqrt(max(var, 0.0)))
    if se == 0.0:
        p = 1.0 if diff == 0.0 else 0.0
        return CrossedComparison(diff, 0.0, df, diff, diff, p, k, n, method)
    q = float(stats.t.ppf(0.5 + confidence / 2, df))
    p = float(2 * stats.t.sf(abs(diff) / se, df))
    return CrossedComparison(diff, se, df, diff - q * se, diff + q * se, p, k, n, method)
