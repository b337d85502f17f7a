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
    assert ms_s + ms_g - ms_sg > 0
    var = (ms_s + ms_g - ms_sg) / 48
    df = (ms_s + ms_g - ms_sg) ** 2 / (ms_s ** 2 / 3 + ms_g ** 2 / 11 + ms_sg ** 2 / 33)
    q = sps.t.ppf(0.975, df)
    assert c.diff == pytest.approx((x - y).mean())
    assert c.se == pytest.approx(np.sqrt(var)) and c.df == pytest.approx(df)
    assert (c.ci_low, c.ci_high) == pytest.approx((c.diff - q * c.se, c.diff + q * c.se))
    assert c.p_value == pytest.approx(2 * sps.t.sf(abs(c.diff) / c.se, df))
    assert c.method == "seeds x games"


def test_one_seed_covers_the_games_only_and_says_so() -> None:
    x = np.array([[1, 0, 1, 1, 0, 1.0]])
    y = np.zeros_like(x)
    c = compare_crossed(x, y)
    assert c.method == "games only (one seed)" and c.df == 5
    assert c.se == pytest.approx(x[0].std(ddof=1) / np.sqrt(6))


@pytest.mark.slow
def test_the_interval_covers_under_seed_and_game_effects() -> None:
    # An arm whose seeds differ (sd 0.15 in success probability) against a fixed policy on
    # games of different difficulty (sd 0.2), no true difference on average: a games-only
    # interval (ignoring the seeds) would cover far less than 95%; this one covers ~95%.
    rng = np.random.default_rng(11)
    k, n, studies = 3, 40, 2000
    covered = games_only = 0
    for _ in range(studies):
        game = rng.normal(0, 0.2, n)
        seed = rng.normal(0, 0.15, (k, 1))
        px = np.clip(0.5 + game + seed, 0, 1)
        py = np.clip(0.5 + game, 0, 1)
        truth = float(np.mean(np.clip(0.5 + game[None] + rng.normal(0, 0.15, (4000, 1)),
                                      0, 1)) - py.mean())
        x = (rng.random((k, n)) < px).astype(float)
        y = (rng.random((k, n)) < np.broadcast_to(py, (k, n))).astype(float)
        c = compare_crossed(x, y, 0.95)
        covered += c.ci_low <= truth <= c.ci_high
        z = (x - y).mean(axis=0)
        h = sps.t.ppf(0.975, n - 1) * z.std(ddof=1) / np.sqrt(n)
        games_only += z.mean() - h <= truth <= z.mean() + h
    rate = covered / studies
    print(f"coverage {rate:.3f}, games only {games_only / studies:.3f}")
    se = np.sqrt(0.95 * 0.05 / studies)
    assert rate >= 0.95 - 3 * se, rate
    assert games_only / studies < rate - 0.05  # what ignoring the seeds would have given


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError):
        compare_crossed(np.zeros((2, 3)), np.zeros((3, 2)))
    with pytest.raises(ValueError):
        compare_crossed(np.zeros((2, 1)), np.zeros((2, 1)))
