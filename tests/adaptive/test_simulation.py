"""The decision rule alone on simulated studies (fast, seeded, vectorised over studies).

Default design: 3 comparisons against a reference, 3 initial seeds, +3 per look, at most 12,
alpha 0.05, paired tests (seed correlation 0.5). Figures are printed (``pytest -s``); the
README's table comes from ``python -m ccpo_lab.adaptive.simulate``.

What is asserted, and why:

* null: the rate of any better/worse verdict is <= alpha + 3 Monte-Carlo se;
* the boundaries alone (one comparison, no futility): within 3 se of alpha on both sides,
  i.e. the t calibration is exact, not just conservative;
* true differences: fewer seeds on average than the fixed 12-seed design, power at least
  that of a fixed design costing as much on average, and at most 6 points below the fixed
  12-seed design (issue 31: both now use the joint pooled family, which made the fixed
  design stronger too; the looks and futility cost 3-5 points against it). The adaptive
  design does NOT match the fixed 12-seed power exactly: the alpha spent before the last
  look and the futility rule cost those points, the price of stopping early. A test
  claiming equality within the paired Monte-Carlo error would fail, so it is not made.
* the group-sequential answer (an inflated maximum): with at most 13 seeds (1.08 x 12)
  the design comes within 2 points of the fixed 12-seed design's power (1-1.5 points
  measured, beyond the paired Monte-Carlo error: the power-3 spending stops earlier than
  O'Brien-Fleming did) and still uses fewer than 12 seeds per arm on average; the same
  studies show the max-12 design's larger shortfall (both printed).
"""

from __future__ import annotations

import math

import numpy as np

from ccpo_lab.adaptive.simulate import (
    default_design,
    figures,
    fixed_design,
    run_design,
    simulate_scores,
)

ARMS = ["ref", "a", "b", "c"]
ALPHA = 0.05
RHO = 0.5
SD_D = math.sqrt(2 * (1 - RHO))  # sd of a paired difference when each seed has sd 1


def mc_se(rate: float, n: int) -> float:
    return math.sqrt(rate * (1 - rate) / n)


def test_null_error_rate_at_most_alpha() -> None:
    n = 4000
    f = figures(default_design(ARMS), [0.0] * 4, ARMS, n, np.random.default_rng(2018),
                rho=RHO)
    bound = ALPHA + 3 * mc_se(ALPHA, n)
    print(f"\nnull, {n} studies, 3 comparisons: any better/worse {f.false_claim_rate[0]:.4f} "
          f"(fixed 12 seeds {f.false_claim_rate[1]:.4f}; bound {bound:.4f}); seeds "
          f"{f.mean_seeds[0]:.1f} vs {f.mean_seeds[1]:.0f}")
    assert f.false_claim_rate[0] <= bound
    assert f.mean_seeds[0] < 0.8 * f.mean_seeds[1]  # futility saves seeds at the null


def test_null_error_rate_with_discrete_success_rates() -> None:
    """Scores that are success rates over 48 episodes (discrete, with a seed effect)."""
    n = 4000
    rng = np.random.default_rng(48)
    sc = rng.binomial(48, 0.45, (n, 4, 12)) / 48 + rng.normal(0, 0.05, (n, 1, 12))
    out = run_design(default_design(ARMS), sc, ARMS)
    rate = float((out.claims != 0).any(axis=1).mean())
    print(f"\nnull, discrete success rates, {n} studies: any better/worse {rate:.4f}")
    assert rate <= ALPHA + 3 * mc_se(ALPHA, n)


def test_boundaries_alone_spend_exactly_alpha() -> None:
    n = 20_000
    arms = ["ref", "a"]
    d = default_design(arms, futility=False)
    sc = simulate_scores([0.0, 0.0], n, d.max_seeds, np.random.default_rng(1979), rho=RHO)
    rate = float((run_design(d, sc, arms).claims != 0).mean())
    normal = float((run_design(d, sc, arms, method="normal").claims != 0).mean())
    fixed = float((fixed_design(d, sc, arms) != 0).mean())
    se = mc_se(ALPHA, n)
    print(f"\none comparison, no futility, {n} null studies: calibrated {rate:.4f}, "
          f"normal-theory levels {normal:.4f}, fixed {fixed:.4f} (alpha {ALPHA} +/- {3 * se:.4f})")
    assert abs(rate - ALPHA) <= 3 * se
    assert normal >= rate


def test_power_and_seeds_against_the_fixed_design() -> None:
    n = 4000
    rng = np.random.default_rng(1983)
    scenarios = {"a, b, c +1.0 sd_d": (1.0, 1.0, 1.0), "a +0.8, b +1.2, c 0": (0.8, 1.2, 0.0)}
    for title, eff in scenarios.items():
        means = [0.0, *(e * SD_D for e in eff)]
        f = figures(default_design(ARMS), means, ARMS, n, rng, rho=RHO)
        lines = [f"{title}, {n} studies: seeds per study {f.mean_seeds[0]:.1f} adaptive vs "
                 f"{f.mean_seeds[1]:.0f} fixed; FWER {f.false_claim_rate[0]:.4f}"]
        for arm, e, (ad, fx), eq in zip(ARMS[1:], eff, f.power, f.equal_cost_power,
                                        strict=True):
            if e == 0:
                continue
            lines.append(f"  {arm}: power {ad:.3f} adaptive, {fx:.3f} fixed 12 seeds, "
                         f"{eq:.3f} fixed {f.equal_cost_seeds} seeds (equal cost)")
            assert ad >= fx - 0.06
            assert ad >= eq
        print("\n" + "\n".join(lines))
        assert f.mean_seeds[0] < 0.95 * f.mean_seeds[1]
        assert f.false_claim_rate[0] <= ALPHA + 3 * mc_se(ALPHA, n)


def test_futility_on_the_observed_difference_costs_much_power() -> None:
    """Why the default futility rule is optimistic: stopping when the observed difference
    itself would need more than the maximum (confidence 0.5) halves the power."""
    n = 4000
    means = [0.0, SD_D, SD_D, SD_D]
    f_def = figures(default_design(ARMS), means, ARMS, n, np.random.default_rng(5), rho=RHO)
    f_obs = figures(default_design(ARMS, futility_confidence=0.5), means, ARMS, n,
                    np.random.default_rng(5), rho=RHO)
    print(f"\n+1.0 sd_d: power {f_def.power[:, 0].mean():.3f} (default), "
          f"{f_obs.power[:, 0].mean():.3f} (futility on the observed difference); seeds "
          f"{f_def.mean_seeds[0]:.1f} vs {f_obs.mean_seeds[0]:.1f}")
    assert f_obs.power[:, 0].mean() < f_def.power[:, 0].mean() - 0.2
    assert f_obs.mean_seeds[0] < f_def.mean_seeds[0]


def test_an_inflated_maximum_reaches_the_fixed_power_with_fewer_seeds() -> None:
    """Max 13 seeds comes within 2 points of the fixed 12-seed power; max 12 falls short."""
    n = 4000
    scenarios = {"a, b, c +1.0 sd_d": (1.0, 1.0, 1.0), "a, b, c +0.7 sd_d": (0.7, 0.7, 0.7),
                 "a +0.8, b +1.2, c 0": (0.8, 1.2, 0.0)}
    for k, (title, eff) in enumerate(scenarios.items()):
        means = [0.0, *(e * SD_D for e in eff)]
        lines = [f"{title}, {n} studies, against the fixed 12-seed design:"]
        for max_seeds in (12, 13):
            f = figures(default_design(ARMS, max_seeds=max_seeds), means, ARMS, n,
                        np.random.default_rng(1983 + k), rho=RHO, fixed_seeds=12)
            real = [i for i, e in enumerate(eff) if e != 0]
            ad = float(f.power[real, 0].mean())
            fx = float(f.power[real, 1].mean())
            # an upper bound of the mean's paired se (|cov| <= se_i se_j)
            se = float(np.sqrt(np.mean(f.power_diff_se[real] ** 2)))
            per_arm = f.mean_seeds[0] / len(ARMS)
            lines.append(f"  max {max_seeds}: power {ad:.3f} vs fixed {fx:.3f} (difference "
                         f"{ad - fx:+.3f}, MC se <= {se:.3f}); seeds per arm {per_arm:.2f} "
                         f"vs 12; FWER {f.false_claim_rate[0]:.4f}")
            if max_seeds == 13:
                assert ad >= fx - 0.02 - 2 * se
                assert per_arm < 12
                assert f.false_claim_rate[0] <= ALPHA + 3 * mc_se(ALPHA, n)
            else:
                assert ad < fx - 2 * se  # the honest max-12 figure: the looks cost power
        print("\n" + "\n".join(lines))
