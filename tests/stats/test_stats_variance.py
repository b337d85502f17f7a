"""The variance decompositions recover known components in simulation.

Studies are simulated from the models the estimators assume, on the probability scale
with Bernoulli episodes (what evaluations are), and the average estimate over many
studies is compared with the truth of the simulated studies (their realised components,
which clipping probabilities to [0.01, 0.99] barely moves): within 4 Monte-Carlo standard
errors and a few percent. The projections are checked against simulated studies with one
more seed and with twice the games.
"""

from __future__ import annotations

import numpy as np
import pytest

from ccpo_lab.stats.variance import (
    binomial_noise,
    decompose_crossed,
    decompose_window,
    project,
)

K, N = 5, 48
SEED_SD, GAME_SD, INTER_SD = 0.06, 0.15, 0.08


def study(rng: np.random.Generator, k: int = K, n: int = N, r: int = 2,
          seed_sd: float = SEED_SD, game_sd: float = GAME_SD) -> tuple[np.ndarray, np.ndarray]:
    """(outcomes (k, r, n), true success probabilities (k, n))."""
    p = np.clip(0.45 + rng.normal(0, game_sd, n)[None] + rng.normal(0, seed_sd, k)[:, None]
                + rng.normal(0, INTER_SD, (k, n)), 0.01, 0.99)
    return (rng.random((k, r, n)) < p[:, None, :]).astype(np.float64), p


def _truth(p: np.ndarray) -> tuple[float, float, float]:
    """Realised seed, interaction and replay components of one study's probabilities."""
    k, n = p.shape
    inter = p - p.mean(1, keepdims=True) - p.mean(0, keepdims=True) + p.mean()
    s2_ab = float(np.sum(inter ** 2) / ((k - 1) * (n - 1)))
    return float(p.mean(1).var(ddof=1) - s2_ab / n), s2_ab, float(np.mean(p * (1 - p)))


def _close(est: np.ndarray, truth: float, rel: float) -> None:
    se = est.std(ddof=1) / np.sqrt(est.size)
    assert abs(est.mean() - truth) <= max(4 * se, 1e-12), (est.mean(), truth, se)
    assert abs(est.mean() - truth) <= rel * abs(truth), (est.mean(), truth)


def test_the_crossed_decomposition_recovers_seed_interaction_and_replay_parts() -> None:
    rng = np.random.default_rng(7)
    est, true = [], []
    for _ in range(6000):
        y, p = study(rng)
        d = decompose_crossed(y)
        est.append((d.seed_raw, d.interaction_raw, d.replay, d.var_means))
        true.append(_truth(p))
    e, t = np.array(est), np.array(true)
    _close(e[:, 0], t[:, 0].mean(), 0.03)       # measured: within 1%
    _close(e[:, 1], t[:, 1].mean(), 0.05)       # within 1%
    _close(e[:, 2], t[:, 2].mean(), 0.005)      # within 0.05%
    # the parts add up to the expected variance of a seed mean
    expected = t[:, 0].mean() + t[:, 1].mean() / N + t[:, 2].mean() / (2 * N)
    _close(e[:, 3], expected, 0.03)


def test_with_one_repeat_the_episode_part_is_the_per_game_residual() -> None:
    rng = np.random.default_rng(11)
    seed_part, episode, true_seed, true_episode = [], [], [], []
    for _ in range(6000):
        y, p = study(rng, r=1)
        d = decompose_crossed(y)
        assert np.isnan(d.interaction) and np.isfinite(d.residual)
        seed_part.append(d.seed_raw)
        episode.append(d.episode)
        s, ab, e = _truth(p)
        true_seed.append(s)
        true_episode.append(ab / N + e / N)
    _close(np.array(seed_part), float(np.mean(true_seed)), 0.05)
    _close(np.array(episode), float(np.mean(true_episode)), 0.01)


def test_a_plain_binomial_would_count_game_difficulty_as_noise() -> None:
    # the crossed estimate removes the games' spread, which is common to every seed
    rng = np.random.default_rng(3)
    crossed, binomial, true = [], [], []
    for _ in range(3000):
        y, p = study(rng, r=1, game_sd=0.25)
        crossed.append(decompose_crossed(y).episode)
        m = y.mean(axis=(1, 2))
        binomial.append(float(np.mean(m * (1 - m) / (N - 1))))
        _, ab, e = _truth(p)
        true.append(ab / N + e / N)
    _close(np.array(crossed), float(np.mean(true)), 0.01)
    assert np.mean(binomial) > 1.2 * np.mean(true)  # measured: 1.27x


def test_the_window_decomposition_recovers_seed_drift_and_binomial_parts() -> None:
    rng = np.random.default_rng(5)
    m, n_ep = 4, 48
    est, noise = [], []
    for _ in range(8000):
        level = 0.4 + rng.normal(0, 0.07, K)
        p = np.clip(level[:, None] + rng.normal(0, 0.03, (K, m)), 0.01, 0.99)
        v = rng.binomial(n_ep, p) / n_ep
        d = decompose_window(v, binomial_noise(v, n_ep))
        est.append((d.seed_raw, d.episode * m, d.drift_raw * m))
        noise.append(float(np.mean(p * (1 - p) / n_ep)))
    e = np.array(est)
    _close(e[:, 0], 0.07 ** 2, 0.05)
    _close(e[:, 1], float(np.mean(noise)), 0.01)
    _close(e[:, 2], 0.03 ** 2, 0.10)  # the drift between evaluations (before truncation)


def test_the_projections_match_simulated_studies() -> None:
    # the variance of the seed means with twice the games: V - e / 2 estimates it without
    # bias (e: the estimated episode part); the projection uses the truncated components
    # (seed + e / 2, never 0), 11% above it in this simulation (conservative)
    rng = np.random.default_rng(13)
    unbiased, projected, observed_2n, v_now = [], [], [], []
    for _ in range(4000):
        y, _ = study(rng, r=1)
        d = decompose_crossed(y)
        unbiased.append(d.var_means - d.episode / 2)
        projected.append(d.seed + d.episode / 2)
        v_now.append(d.var_means)
        y2, _ = study(rng, r=1, n=2 * N)
        observed_2n.append(y2.mean(axis=(1, 2)).var(ddof=1))
    pred, obs = np.array(unbiased), np.array(observed_2n)
    se = np.sqrt(pred.var() / pred.size + obs.var() / obs.size)
    assert abs(pred.mean() - obs.mean()) <= 4 * se
    assert pred.mean() == pytest.approx(obs.mean(), rel=0.04)
    assert obs.mean() <= np.mean(projected) <= 1.15 * obs.mean()
    assert obs.mean() < 0.8 * np.mean(v_now)


def test_the_advice_follows_the_t_quantiles_and_the_episode_share() -> None:
    # at 3 seeds one more seed always wins; at 10 seeds episodes win from a share of ~0.24
    assert project(3, 0.01, 0.0, 0.01).advice == "seeds"
    assert project(10, 0.01, 0.0080, 0.0020).advice == "seeds"
    assert project(10, 0.01, 0.0070, 0.0030).advice == "episodes"
    assert project(5, 0.01, 0.0050, 0.0050).advice == "seeds"
    assert project(5, 0.01, 0.0040, 0.0060).advice == "episodes"
    p = project(5, 0.01, 0.005, 0.005)
    assert p.now > p.more_seed and p.now > p.more_episodes
    # an observed variance below the episode noise projects from the components, not 0
    low = project(3, 0.0001, 0.0, 0.01)
    assert low.more_episodes > 0 and low.more_episodes > low.now
    assert project(1, 0.01, 0.005, 0.005).advice == "unknown"
    assert project(4, 0.0, 0.0, 0.0).advice == "unknown"


def test_degenerate_and_malformed_input() -> None:
    d = decompose_crossed(np.ones((1, 1, 4)))
    assert d.n_seeds == 1 and np.isnan(d.var_means) and d.projection.advice == "unknown"
    with pytest.raises(ValueError, match="seeds, repeats, games"):
        decompose_crossed(np.ones((3, 4)))
    with pytest.raises(ValueError, match="finite"):
        decompose_crossed(np.full((2, 1, 3), np.nan))
    with pytest.raises(ValueError, match=">= 2 games"):
        decompose_crossed(np.ones((3, 1, 1)))
    with pytest.raises(ValueError, match="rates in"):
        binomial_noise(np.array([1.5]), 10)
    with pytest.raises(ValueError, match="one shape"):
        decompose_window(np.ones((2, 3)), np.ones((2, 2)))
    z = decompose_crossed(np.zeros((3, 1, 5)))
    assert z.var_means == 0 and z.projection.advice == "unknown"
