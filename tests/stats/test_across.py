"""The arm x environment interaction: interval coverage and error rates, by simulation.

Each test draws 2,000 studies from an explicit Generator and checks a rate against its
nominal value within about 3 Monte-Carlo errors (0.0049 at 0.95, 0.0049 at 0.05).
"""

from __future__ import annotations

import numpy as np
import pytest

from ccpo_lab.stats.across import (
    environment_difference,
    independent_interaction,
    paired_interaction,
)

STUDIES = 2_000


def _paired_study(rng: np.random.Generator, n: int, deltas: list[float],
                  sds: list[float]) -> np.ndarray:
    """float (n, E): per-seed differences; a seed effect shared by the environments."""
    seed = rng.normal(0.0, 0.7, (n, 1))
    return np.asarray(deltas) + seed + rng.normal(0.0, 1.0, (n, len(deltas))) * sds


def test_paired_interval_covers_the_interaction() -> None:
    rng = np.random.default_rng(3201)
    hits = 0
    for _ in range(STUDIES):
        it = paired_interaction(_paired_study(rng, 5, [0.3, -0.2], [1.0, 2.5]))
        assert it.ci is not None
        hits += it.ci[0] <= 0.5 <= it.ci[1]
    assert 0.935 <= hits / STUDIES <= 0.965


def test_welch_interval_covers_the_interaction() -> None:
    rng = np.random.default_rng(3202)
    hits = 0
    for _ in range(STUDIES):
        parts = [environment_difference(rng.normal(0.4, 1.0, 4), rng.normal(0.0, 0.5, 4),
                                        paired=False),
                 environment_difference(rng.normal(1.0, 3.0, 6), rng.normal(0.9, 2.0, 6),
                                        paired=False)]
        d, v, f = zip(*parts, strict=True)
        it = independent_interaction(d, v, f, n_seeds=4)
        assert it.ci is not None
        hits += it.ci[0] <= 0.3 <= it.ci[1]
    assert 0.93 <= hits / STUDIES <= 0.97


@pytest.mark.parametrize("form", ["paired", "independent"])
def test_three_environments_reject_at_alpha_under_the_null(form: str) -> None:
    rng = np.random.default_rng(3203 if form == "paired" else 3204)
    rejected = 0
    for _ in range(STUDIES):
        if form == "paired":
            it = paired_interaction(_paired_study(rng, 6, [0.5, 0.5, 0.5], [1.0, 2.0, 0.5]))
        else:
            parts = [environment_difference(rng.normal(0.5, sd, 8), rng.normal(0.0, sd, 8),
                                            paired=False) for sd in (1.0, 2.0, 0.5)]
            d, v, f = zip(*parts, strict=True)
            it = independent_interaction(d, v, f, n_seeds=8)
        rejected += it.p < 0.05
    assert 0.035 <= rejected / STUDIES <= 0.065, rejected / STUDIES


def test_a_large_interaction_is_found_and_two_environments_agree_with_the_t() -> None:
    rng = np.random.default_rng(3205)
    d = _paired_study(rng, 6, [2.0, -2.0, 0.0], [0.5, 0.5, 0.5])
    assert paired_interaction(d).p < 1e-3
    two = paired_interaction(d[:, :2])
    assert two.test == "paired t" and two.estimate == pytest.approx(
        float((d[:, 0] - d[:, 1]).mean()))
    low = paired_interaction(d[:2])  # fewer seeds than environments
    assert low.test == "repeated-measures F (lower bound)" and low.df == (1.0, 1.0)


def test_paired_difference_and_bad_shapes() -> None:
    diff, var, df = environment_difference([1.0, 2.0, 4.0], [0.0, 1.0, 1.0], paired=True)
    assert (diff, df) == (5 / 3, 2.0)
    assert var == pytest.approx(np.var([1, 1, 3], ddof=1) / 3)
    with pytest.raises(ValueError):
        paired_interaction(np.zeros((1, 2)))
    with pytest.raises(ValueError):
        independent_interaction([0.1], [1.0], [3.0], n_seeds=4)


def test_two_environments_paired_rejects_at_alpha_under_the_null() -> None:
    rng = np.random.default_rng(3205)
    rejected = sum(paired_interaction(_paired_study(rng, 4, [0.2, 0.2], [1.0, 3.0])).p < 0.05
                   for _ in range(STUDIES))
    assert 0.035 <= rejected / STUDIES <= 0.065, rejected / STUDIES


def test_fewer_seeds_than_environments_is_conservative() -> None:
    """n = 3 seeds, E = 5 environments: the lower-bound F rejects at most at alpha (its
    rate may be well below it: the price of knowing nothing about the covariance), and
    finds a large interaction."""
    rng = np.random.default_rng(3206)
    sds = [0.5, 1.0, 2.0, 1.0, 3.0]
    tests = {paired_interaction(_paired_study(rng, 3, [0.0] * 5, sds)).test
             for _ in range(3)}
    assert tests == {"repeated-measures F (lower bound)"}
    rejected = sum(paired_interaction(_paired_study(rng, 3, [0.0] * 5, sds)).p < 0.05
                   for _ in range(STUDIES))
    assert rejected / STUDIES <= 0.06, rejected / STUDIES
    big = [paired_interaction(_paired_study(rng, 3, [0, 0, 20, 0, -20], [0.5] * 5)).p
           for _ in range(200)]
    assert np.mean(np.array(big) < 0.05) > 0.5
