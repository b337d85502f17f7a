"""An arm against a fixed policy on common games (:mod:`ccpo_lab.stats.crossed`)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from ccpo_lab.stats.crossed import compare_crossed


def _anova(z: np.ndarray) -> tuple[float, float, float]:
    """Mean squares from the sums-of-squares identity SS_total = SS_S + SS_G + SS_SG
    (written out independently of the module)."""
    k, n = z.shape
    grand = z.sum() / (k * n)
    ss_total = sum((z[i, j] - grand) ** 2 for i in range(k) for j in range(n))
    ss_s = sum(n * (z[i].sum() / n - grand) ** 2 for i in range(k))
    ss_g = sum(k * (z[:, j].sum() / k - grand) ** 2 for j in range(n))
    ss_sg = ss_total - ss_s - ss_g
    return ss_s / (k - 1), ss_g / (n - 1), ss_sg / ((k - 1) * (n - 1))


def test_the_interval_is_the_two_way_random_models() -> None:
    rng = np.random.default_rng(3)
    x = (rng.random((4, 12)) < 0.6).astype(float)
    y = (rng.random((4, 12)) < 0.4).astype(float)
    c = compare_crossed(x, y, 0.95)
    ms_s, ms_g, ms_sg = _anova(x - y)
    assert ms_g > ms_sg
    var = (ms_s + ms_g - ms_sg) / 48  # seeds' part MS_S, games' part MS_G - MS_SG
    df = 3  # the seeds'

    q = sps.t.ppf(0.975, df)
    assert c.diff == pytest.approx((x - y).mean())
    assert c.se == pytest.approx(np.sqrt(var)) and c.df == pytest.approx(df)
    assert (c.ci_low, c.ci_high) == pytest.approx((c.diff - q * c.se, c.diff + q * c.se))
    assert c.p_value == pytest.approx(2 * sps.t.sf(abs(c.diff) / c.se, df))
    assert c.method == "seeds x games"


def test_a_vanishing_game_part_keeps_a_sane_interval() -> None:
    # the games' part estimated below zero: set to 0, the seeds' part alone, k - 1 df (a
    # Satterthwaite over MS_S + MS_G - MS_SG would give a fraction of a degree of freedom)
    x = np.array([[1, 0, 1, 0, 1, 0], [0, 1, 0, 1, 0, 1], [1, 1, 0, 0, 1, 1.0]])
    y = np.zeros_like(x)
    c = compare_crossed(x, y)
    ms_s, ms_g, ms_sg = _anova(x - y)
    assert ms_g < ms_sg and c.method == "seeds x games (game part 0)"
    assert c.df == pytest.approx(2) and c.se == pytest.approx(np.sqrt(ms_s / 18))
    assert c.ci_high - c.ci_low < 2


def test_one_seed_covers_the_games_only_and_says_so() -> None:
    x = np.array([[1, 0, 1, 1, 0, 1.0]])
    y = np.zeros_like(x)
    c = compare_crossed(x, y)
    assert c.method == "games only (one seed)" and c.df == 5
    assert c.se == pytest.approx(x[0].std(ddof=1) / np.sqrt(6))


@pytest.mark.slow
@pytest.mark.parametrize(("k", "n", "sd_seed", "sd_game"),
                         [(2, 48, 0.1, 0.2), (3, 40, 0.15, 0.2), (10, 48, 0.1, 0.2)])
def test_the_interval_covers_under_seed_and_game_effects(k: int, n: int, sd_seed: float,
                                                         sd_game: float) -> None:
    # An arm whose seeds differ (in success probability) against a fixed policy, on games
    # of different difficulty, Bernoulli episodes; the truth is the population difference
    # (over seeds and games). The 95% interval covers at least 95% (within 3 Monte-Carlo
    # errors); one over the games alone, ignoring the seeds, covers far less.
    rng = np.random.default_rng(11 + k)
    g, a = rng.normal(0, sd_game, 400_000), rng.normal(0, sd_seed, 400_000)
    truth = float(np.clip(0.5 + g + a, 0, 1).mean() - np.clip(0.5 + g, 0, 1).mean())
    studies, covered, games_only = 2000, 0, 0
    for _ in range(studies):
        game = rng.normal(0, sd_game, n)
        px = np.clip(0.5 + game + rng.normal(0, sd_seed, (k, 1)), 0, 1)
        py = np.broadcast_to(np.clip(0.5 + game, 0, 1), (k, n))
        x = (rng.random((k, n)) < px).astype(float)
        y = (rng.random((k, n)) < py).astype(float)
        c = compare_crossed(x, y, 0.95)
        covered += c.ci_low <= truth <= c.ci_high
        z = (x - y).mean(axis=0)
        h = sps.t.ppf(0.975, n - 1) * z.std(ddof=1) / np.sqrt(n)
        games_only += z.mean() - h <= truth <= z.mean() + h
    rate = covered / studies
    print(f"k={k} n={n}: coverage {rate:.3f}, games only {games_only / studies:.3f}")
    assert rate >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / studies), rate
    assert games_only / studies < rate - 0.05


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError):
        compare_crossed(np.zeros((2, 3)), np.zeros((3, 2)))
    with pytest.raises(ValueError):
        compare_crossed(np.zeros((2, 1)), np.zeros((2, 1)))
