"""Where the uncertainty of an arm's mean comes from: seeds or evaluation episodes.

An arm's score is the mean over seeds of each seed's mean success, and its t interval's
width comes from the variance of those per-seed means. That variance has two sources: the
seeds themselves (trained policies differ) and the finite number of evaluation episodes
each seed's mean averages. The decompositions here split it, with the classical
analysis-of-variance (ANOVA) estimators of variance components (Searle, Casella &
McCulloch 1992, *Variance Components*, Wiley: ch. 3, the one-way classification, and
ch. 4, balanced two-way crossed classifications with replication), and say what the
interval's half-width would be with one more seed or with twice the episodes per seed.

**Checkpoint re-score** (:func:`decompose_crossed`): ``y[s, r, g]``, seed ``s`` of ``k``,
repeat ``r`` of ``R``, game ``g`` of ``N``; every seed plays the same games (the common
draw). The balanced two-way random model ``y = mu + a_s + b_g + (ab)_sg + e_sgr``
(seeds and games random: the games are a sample of the games one could have drawn) has
the mean squares, with expectations (Searle et al. 1992, sec. 4.5)::

    MS_A  = N R sum_s (ybar_s.. - ybar)^2 / (k - 1)               E = s2_e + R s2_ab + N R s2_a
    MS_AB = R sum_sg (ybar_sg. - ybar_s.. - ybar_.g. + ybar)^2
            / ((k - 1)(N - 1))                                    E = s2_e + R s2_ab
    MS_E  = sum (y - ybar_sg.)^2 / (k N (R - 1))                  E = s2_e

so ``s2_a = (MS_A - MS_AB) / (N R)``, ``s2_ab = (MS_AB - MS_E) / R``, ``s2_e = MS_E``
(negative estimates truncated at 0, flagged). The variance of a seed's mean is then::

    Var(ybar_s..) = s2_a  +  s2_ab / N + s2_e / (N R)  =  E[MS_A] / (N R)
                    seeds    episodes (games, and replays of a game)

The game effect ``b_g`` is common to every seed and drops out: a plain binomial
``p (1 - p) / n`` per seed would count the spread of game difficulty as episode noise.
With one repeat (``R = 1``) ``s2_ab`` and ``s2_e`` are not separable: their sum is
``MS_AB``, the per-game residual, and the episode part is ``MS_AB / N``. For a paired
comparison the same decomposition is applied to the game-level differences
``y_X[s, r, g] - y_Y[s, r, g]`` (arms paired by seed, game and repeat on the common draw).

**Training-time window** (:func:`decompose_window`): per seed the window's evaluations
(their success rates, ``n_e`` episodes each). One-way random model, evaluations nested in
seeds (Searle et al. 1992, sec. 3.5; the unbalanced ``n0``): ``s2_seed = (MS_B - MS_W) /
n0`` and ``MS_W`` the variance of a seed's evaluations around its mean, whose binomial
part (the evaluations' own episode noise) is estimated by the mean of
``p (1 - p) / (n_e - 1)`` (unbiased for ``p (1 - p) / n_e``), the rest being the policy's
drift between evaluation steps. It cannot remove the games' spread (it has rates, not
episodes): its episode part is an upper bound when the games differ in difficulty.

**The choice** (:func:`project`): ``now`` is the report's t half-width of the mean of the
``k`` seeds, ``t_{k-1} sqrt(V / k)`` from ``V``, the observed variance of the seed means.
The projections are expectations under the estimated components (``seed`` and
``episode``, truncated at 0, and the window's ``drift``), so that an observed ``V`` below
what the episode noise alone implies (likely at 3 seeds: ``V`` has 2 degrees of freedom)
does not project a half-width of 0: with one more seed ``t_k sqrt((seed + episode + drift)
/ (k + 1))``; with twice the episodes per seed (new games, so the episode part halves)
``t_{k-1} sqrt((seed + drift + episode / 2) / k)``. The smaller names what to buy. The t
quantile weighs heavily at few seeds: with ``s`` the episode share, one more seed beats
twice the episodes at 3 seeds whatever ``s`` (``t_2 sqrt(1 / 6) > t_3 sqrt(1 / 4)``); twice
the episodes wins from ``s`` > 0.57 at 5 seeds and ``s`` > 0.24 at 10.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from ccpo_lab.stats.checks import check_confidence

__all__ = ["Decomposition", "Projection", "binomial_noise", "decompose_crossed",
           "decompose_window", "project"]


@dataclass(frozen=True)
class Projection:
    """Interval half-widths of the mean now, with one more seed, with twice the episodes.

    Attributes:
        now: the t half-width of the current seeds' mean (the report's interval).
        more_seed: expected half-width with ``k + 1`` seeds, the same episodes.
        more_episodes: expected half-width with ``k`` seeds, twice the episodes per seed.
        advice: ``seeds``, ``episodes`` (whichever is narrower, by more than 1%), ``either``
            or ``unknown`` (fewer than 2 seeds, or no variance).
    """

    now: float
    more_seed: float
    more_episodes: float
    advice: str


@dataclass(frozen=True)
class Decomposition:
    """The variance of the per-seed means split into a seed part and an episode part.

    Attributes:
        n_seeds: ``k``.
        n_games: ``N`` games per seed (training window: evaluations per seed, on average).
        n_repeats: ``R`` episodes per game (training window: nan).
        mean: mean over seeds of the per-seed means.
        var_means: observed variance (ddof=1) of the per-seed means.
        seed: the between-seed part, ``s2_a`` (>= 0).
        episode: the episode part of the variance of a seed mean (``s2_ab / N + s2_e /
            (N R)``; the window's: binomial noise / evaluations per seed).
        drift: training window only: the within-run drift part (0 for a re-score).
        interaction: ``s2_ab`` (seed x game), nan when ``R = 1`` (not separable).
        replay: ``s2_e`` (replays of one game), nan when ``R = 1``.
        residual: ``MS_AB`` with ``R = 1`` (``s2_ab + s2_e``), else nan.
        episode_share: ``episode / (seed + episode + drift)``; nan when all are 0.
        truncated: an estimate was negative and was set to 0.
        seed_raw: ``s2_a`` before truncation (unbiased; may be negative).
        interaction_raw: ``s2_ab`` before truncation (nan when ``R = 1``).
        drift_raw: the window's drift part before truncation (0 for a re-score).
        projection: :class:`Projection`.
        confidence: level of the half-widths.
    """

    n_seeds: int
    n_games: float
    n_repeats: float
    mean: float
    var_means: float
    seed: float
    episode: float
    drift: float
    interaction: float
    replay: float
    residual: float
    episode_share: float
    truncated: bool
    seed_raw: float
    interaction_raw: float
    drift_raw: float
    projection: Projection
    confidence: float


@functools.lru_cache(maxsize=1024)
def _t(df: float, confidence: float) -> float:
    """The two-sided t quantile (cached: a report asks for a few, many times)."""
    return float(special.stdtrit(df, 0.5 + confidence / 2.0)) if df >= 1 else float("nan")


def project(k: int, var_now: float, seed_part: float, episode_part: float,
            confidence: float = 0.95, other: float = 0.0) -> Projection:
    """Half-widths of the mean of ``k`` seeds: now (from ``var_now``, the observed variance
    of the seed means: the report's interval), and, expected under the estimated
    components (``seed_part + episode_part + other``, ``other``: a part more episodes do not
    shrink, the training window's drift), with one more seed and with twice the episodes
    per seed (the episode part halved)."""
    c = check_confidence(confidence)
    nan = float("nan")
    if k < 2 or not np.isfinite(var_now):
        return Projection(nan, nan, nan, "unknown")
    now = _t(k - 1, c) * float(np.sqrt(max(var_now, 0.0) / k))
    model = seed_part + episode_part + other
    seed = _t(k, c) * float(np.sqrt(model / (k + 1)))
    eps = _t(k - 1, c) * float(np.sqrt((seed_part + other + episode_part / 2.0) / k))
    if not model > 0 or not np.isfinite(model):
        return Projection(now, seed, eps, "unknown")
    if seed < 0.99 * eps:
        advice = "seeds"
    elif eps < 0.99 * seed:
        advice = "episodes"
    else:
        advice = "either"
    return Projection(now, seed, eps, advice)


def decompose_crossed(y: ArrayLike, confidence: float = 0.95) -> Decomposition:
    """The two-way crossed decomposition of a re-score on a common draw.

    Args:
        y: float (k, R, N): outcome (0/1 success, or a game-level paired difference) of
            seed ``s``, repeat ``r``, game ``g``; no nan.
        confidence: level of the half-widths.

    Raises:
        ValueError: not 3-D, a nan or inf, or fewer than 2 games.
    """
    c = check_confidence(confidence)
    a = np.asarray(y, dtype=np.float64)
    if a.ndim != 3:
        raise ValueError(f"y must be (seeds, repeats, games), got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("y must be finite (no nan or inf)")
    k, r, n = a.shape
    if n < 2 or k < 1 or r < 1:
        raise ValueError(f"need >= 1 seed, >= 1 repeat and >= 2 games, got {a.shape}")
    nan = float("nan")
    seed_means = a.mean(axis=(1, 2))                       # (k,)
    mean = float(seed_means.mean())
    if k < 2:
        return Decomposition(k, n, r, mean, nan, nan, nan, 0.0, nan, nan, nan, nan, False,
                             nan, nan, 0.0, Projection(nan, nan, nan, "unknown"), c)
    cell = a.mean(axis=1)                                  # (k, N)
    game = cell.mean(axis=0)                               # (N,)
    ms_a = n * r * float(np.sum((seed_means - mean) ** 2)) / (k - 1)
    inter = cell - seed_means[:, None] - game[None, :] + mean
    ms_ab = r * float(np.sum(inter ** 2)) / ((k - 1) * (n - 1))
    var_means = ms_a / (n * r)
    raw_seed = (ms_a - ms_ab) / (n * r)
    if r >= 2:
        ms_e = float(np.sum((a - cell[:, None, :]) ** 2)) / (k * n * (r - 1))
        raw_ab = (ms_ab - ms_e) / r
        s2_ab, s2_e = max(raw_ab, 0.0), ms_e
        episode = s2_ab / n + s2_e / (n * r)
        truncated = raw_seed < 0 or raw_ab < 0
        residual = nan
    else:
        s2_ab = s2_e = raw_ab = nan
        episode = ms_ab / n
        truncated = raw_seed < 0
        residual = ms_ab
    seed = max(raw_seed, 0.0)
    total = seed + episode
    share = episode / total if total > 0 else nan
    return Decomposition(k, n, r, mean, var_means, seed, episode, 0.0, s2_ab, s2_e, residual,
                         share, bool(truncated), raw_seed, raw_ab, 0.0,
                         project(k, var_means, seed, episode, c), c)


def binomial_noise(values: ArrayLike, n_episodes: ArrayLike | float) -> NDArray[np.float64]:
    """The episode noise of each evaluation: ``p (1 - p) / (n - 1)``, unbiased for the
    variance ``p (1 - p) / n`` of a success rate over ``n`` episodes. Shapes: ``values``
    (...), ``n_episodes`` broadcastable; nan stays nan.

    Raises:
        ValueError: a rate outside [0, 1], or fewer than 2 episodes.
    """
    v = np.asarray(values, dtype=np.float64)
    ne = np.broadcast_to(np.asarray(n_episodes, dtype=np.float64), v.shape)
    ok = ~np.isnan(v)
    if np.any((v[ok] < 0) | (v[ok] > 1)):
        raise ValueError("values must be success rates in [0, 1]")
    if np.any(~(ne[ok] >= 2)):
        raise ValueError("each evaluation needs >= 2 episodes")
    out = np.full(v.shape, np.nan)
    out[ok] = v[ok] * (1 - v[ok]) / (ne[ok] - 1)
    return out


def decompose_window(values: ArrayLike, noise: ArrayLike, confidence: float = 0.95
                     ) -> Decomposition:
    """The one-way decomposition of the training-time window (evaluations nested in seeds).

    Args:
        values: float (k, m): evaluation ``j`` of seed ``s`` in the window (a success rate,
            or a paired difference of two arms' rates); nan = no evaluation (seeds may have
            different counts).
        noise: float (k, m): the estimated episode-noise variance of each value
            (:func:`binomial_noise`; for a difference, the sum of both arms').
        confidence: level of the half-widths.

    Raises:
        ValueError: shapes differ or are not 2-D, or a value has no noise estimate.
    """
    c = check_confidence(confidence)
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(noise, dtype=np.float64)
    if v.ndim != 2 or w.shape != v.shape:
        raise ValueError(f"values and noise must be (seeds, evaluations) of one shape, got "
                         f"{v.shape} and {w.shape}")
    ok = ~np.isnan(v)
    if np.any(~np.isfinite(w[ok])) or np.any(w[ok] < 0):
        raise ValueError("every value needs a finite noise variance >= 0")
    counts = ok.sum(axis=1)
    keep = counts > 0
    v, w, ok, counts = v[keep], w[keep], ok[keep], counts[keep]
    k = int(v.shape[0])
    nan = float("nan")
    total_n = int(counts.sum())
    means = np.nansum(v, axis=1) / counts if k else np.empty(0)
    m_bar = float(counts.mean()) if k else nan
    if k < 2 or total_n - k < 1:
        mean = float(means.mean()) if k else nan
        return Decomposition(k, m_bar, nan, mean, nan, nan, nan, nan, nan, nan, nan, nan,
                             False, nan, nan, nan, Projection(nan, nan, nan, "unknown"), c)
    grand = float(v[ok].mean())
    ms_b = float(np.sum(counts * (means - grand) ** 2)) / (k - 1)
    ms_w = float(np.nansum((v - means[:, None]) ** 2)) / (total_n - k)
    n0 = (total_n - float(np.sum(counts ** 2)) / total_n) / (k - 1)
    raw_seed = (ms_b - ms_w) / n0
    binom = float(np.mean(w[ok]))
    m_h = float(k / np.sum(1.0 / counts))                 # harmonic mean of the counts
    episode = binom / m_h
    drift = max(ms_w - binom, 0.0) / m_h
    seed = max(raw_seed, 0.0)
    var_means = float(np.var(means, ddof=1))
    total = seed + episode + drift
    share = episode / total if total > 0 else nan
    return Decomposition(k, m_bar, nan, float(means.mean()), var_means, seed, episode,
                         drift, nan, nan, nan, share, bool(raw_seed < 0 or ms_w < binom),
                         raw_seed, nan, (ms_w - binom) / m_h,
                         project(k, var_means, seed, episode, c, other=drift), c)
