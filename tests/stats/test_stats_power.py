"""Colas et al. 2018 power, seeds needed, minimal detectable difference, verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as sps

from ccpo_lab.stats import (
    compare_arms,
    compare_to_reference,
    holm,
    minimal_detectable_difference,
    seeds_needed,
    verdict,
    welch_type2_error,
)


def test_type2_error_hand_computed() -> None:
    # s1 = s2 = 1, n = 2: nu = (2^2 * 1) / 2 = 2; t_eps = 1 / sqrt(2/2) = 1;
    # beta = t.cdf(t.ppf(0.95, 2) - 1, 2) = t.cdf(2.919986 - 1, 2)
    expected = sps.t.cdf(2.919986 - 1.0, 2)
    assert welch_type2_error(1.0, 1.0, 1.0, 2) == pytest.approx(expected, abs=1e-6)
    # the sign of eps does not matter; vectorised over n
    assert welch_type2_error(-1.0, 1.0, 1.0, 2) == welch_type2_error(1.0, 1.0, 1.0, 2)
    betas = welch_type2_error(1.0, 1.0, 2.0, np.arange(2, 30))
    assert np.all(np.diff(betas) < 0)


def test_type2_error_degenerate() -> None:
    assert math.isnan(welch_type2_error(1.0, 1.0, 1.0, 1))
    assert math.isnan(welch_type2_error(1.0, float("nan"), 1.0, 5))
    assert math.isnan(welch_type2_error(1.0, 0.0, 0.0, 5))
    assert welch_type2_error(1.0, 0.0, 1.0, 5) < 1.0  # one exact arm is fine


def test_seeds_needed_is_first_n_meeting_power() -> None:
    n = seeds_needed(1.0, 1.0, 1.0)
    assert n is not None
    assert welch_type2_error(1.0, 1.0, 1.0, n) < 0.2 <= welch_type2_error(1.0, 1.0, 1.0, n - 1)
    # two-sided needs more; bigger effect needs fewer
    assert seeds_needed(1.0, 1.0, 1.0, two_sided=True) > n
    assert seeds_needed(2.0, 1.0, 1.0) < n


def test_seeds_needed_none_cases() -> None:
    assert seeds_needed(0.0, 1.0, 1.0) is None
    assert seeds_needed(float("nan"), 1.0, 1.0) is None
    assert seeds_needed(1.0, float("nan"), 1.0) is None
    assert seeds_needed(0.001, 10.0, 10.0, n_max=50) is None


def test_power_formula_matches_simulated_welch_tests() -> None:
    # Colas's beta is an approximation; check it against simulated one-sided Welch tests
    rng = np.random.default_rng(42)
    eps, s1, s2 = 1.5, 1.0, 2.0
    n = seeds_needed(eps, s1, s2)
    assert n == 15
    x = rng.normal(eps, s1, size=(4000, n))
    y = rng.normal(0.0, s2, size=(4000, n))
    p = sps.ttest_ind(x, y, axis=1, equal_var=False, alternative="greater").pvalue
    power = 1.0 - welch_type2_error(eps, s1, s2, n)
    assert (p < 0.05).mean() == pytest.approx(power, abs=0.025)  # MC se ~ 0.0063


def test_minimal_detectable_difference_solves_beta() -> None:
    s1, s2, n = 3.0, 5.0, 6
    mdd = minimal_detectable_difference(s1, s2, n)
    root = optimize.brentq(lambda e: welch_type2_error(e, s1, s2, n) - 0.2, 1e-6, 100.0)
    assert mdd == pytest.approx(root, rel=1e-8)
    above = welch_type2_error(mdd * 1.001, s1, s2, n)
    below = welch_type2_error(mdd * 0.999, s1, s2, n)
    assert above < 0.2 < below
    # consistency with seeds_needed: n seeds suffice for a slightly larger eps
    assert seeds_needed(mdd * 1.001, s1, s2) <= n
    assert minimal_detectable_difference(s1, s2, n, two_sided=True) > mdd
    assert math.isnan(minimal_detectable_difference(s1, s2, 1))
    assert math.isnan(minimal_detectable_difference(0.0, 0.0, 5))


def test_verdict_rules() -> None:
    assert verdict(0.05, 0.01, 3, 3).label == "better"
    assert verdict(-0.05, 0.01, 3, 3).label == "worse"
    v = verdict(0.05, 0.2, 3, 3, seeds_needed=12)
    assert v.label == "unresolved" and "12 seeds" in v.reason and v.seeds_needed == 12
    # a single seed on a side is always unresolved, whatever p says
    assert verdict(0.30, 0.0001, 1, 3).label == "unresolved"
    assert verdict(0.30, 0.0001, 3, 1).label == "unresolved"
    assert verdict(0.30, float("nan"), 3, 3).label == "unresolved"
    assert verdict(float("nan"), 0.01, 3, 3).label == "unresolved"
    assert verdict(0.05, 0.04, 3, 3, alpha=0.01).label == "unresolved"


def test_ocar_end_to_end_unresolved() -> None:
    # the OCAR fixture (see test_stats_compare): +1.7 points, 6 seeds per arm, p = 0.558
    y = 80.0 + np.array([-7.0, -3.0, -1.0, 1.0, 3.0, 7.0])
    x = y + 1.7
    c = compare_arms(x, y)
    # Holm with another, clear comparison: sorted 0.001 -> 2 * 0.001; then max(0.002, 0.558)
    p_adj = holm([c.p_value, 0.001])
    assert p_adj[0] == pytest.approx(c.p_value)
    sd = float(np.std(y, ddof=1))
    n = seeds_needed(c.diff, sd, sd, two_sided=True)
    # about 2 * ((1.96 + 0.84) * 4.858 / 1.7)^2 ~ 128 seeds per arm
    assert n is not None and 120 <= n <= 140
    v = verdict(c.diff, p_adj[0], c.n_x, c.n_y, seeds_needed=n)
    assert v.label == "unresolved"
    assert f"about {n} seeds per arm" in v.reason



def test_compare_to_reference_family() -> None:
    ref = np.array([0.80, 0.82, 0.78, 0.81])
    values = {
        "grpo": ref,
        "ccpo": ref + np.array([0.10, 0.11, 0.09, 0.12]),  # clearly better, paired
        "gigpo": ref + np.array([0.01, -0.02, 0.02, 0.00]),  # no clear difference
        "single": np.array([0.95]),  # one seed: always unresolved
    }
    seeds = {k: np.arange(v.size) for k, v in values.items()}
    rows = compare_to_reference(values, "grpo", seeds)
    assert [r.arm for r in rows] == ["ccpo", "gigpo", "single"]
    by = {r.arm: r for r in rows}
    raw = [by["ccpo"].comparison.p_value, by["gigpo"].comparison.p_value]
    # the family has m = 2 testable comparisons; the single-seed arm is nan and not
    # counted; Holm's step-down at Šidák's levels (the one-look design's rule, issue 31)
    lo, hi = sorted(raw)
    sidak = [1 - (1 - lo) ** 2, max(1 - (1 - lo) ** 2, hi)]
    np.testing.assert_allclose(sorted([by["ccpo"].p_holm, by["gigpo"].p_holm]), sidak)
    assert by["ccpo"].p_holm <= holm(raw)[0]
    assert by["ccpo"].comparison.test == "paired"
    assert by["ccpo"].verdict.label == "better"
    assert by["gigpo"].verdict.label == "unresolved" and by["gigpo"].seeds_needed is not None
    assert by["gigpo"].mdd > abs(by["gigpo"].comparison.diff)
    single = by["single"]
    assert single.verdict.label == "unresolved" and math.isnan(single.p_holm)
    assert single.seeds_needed is None and math.isnan(single.mdd)
    with pytest.raises(KeyError):
        compare_to_reference(values, "ppo")


def test_paired_power_hand_computed_and_root() -> None:
    from ccpo_lab.stats import (
        paired_minimal_detectable_difference,
        paired_seeds_needed,
        paired_type2_error,
    )

    # sd_d = 1, n = 4 pairs: df 3, t_eps = 2 / (1 / 2) = 4; beta = t.cdf(t.ppf(0.975, 3) - 4, 3)
    expected = sps.t.cdf(sps.t.ppf(0.975, 3) - 4.0, 3)
    assert paired_type2_error(2.0, 1.0, 4, 0.05, two_sided=True) == pytest.approx(expected)
    assert math.isnan(paired_type2_error(2.0, 1.0, 1)) and math.isnan(paired_type2_error(2.0, 0, 5))
    n = paired_seeds_needed(2.0, 1.0, 0.05, 0.8, two_sided=True)
    beta = lambda k: sps.t.cdf(sps.t.ppf(0.975, k - 1) - 2.0 * math.sqrt(k), k - 1)  # noqa: E731
    assert beta(n) < 0.2 <= beta(n - 1)
    mdd = paired_minimal_detectable_difference(1.0, 6, 0.05, 0.8, two_sided=True)
    root = optimize.brentq(
        lambda e: paired_type2_error(e, 1.0, 6, 0.05, two_sided=True) - 0.2, 1e-6, 10.0)
    assert mdd == pytest.approx(root, rel=1e-8)
    assert paired_seeds_needed(0.0, 1.0) is None and paired_seeds_needed(1.0, 0.0) is None


# Like the demo's gigpo vs grpo: per-seed window means in points, +4.0 with a paired interval
# that excludes 0, while each arm spreads by ~3.7 points across seeds: Welch power from the
# arms' sds asks for many more seeds than the paired test that gives the interval.
GRPO = np.array([46.9, 39.6, 44.3])
GIGPO = GRPO + np.array([4.2, 2.6, 5.2])


def test_paired_seeds_needed_uses_the_sd_of_the_differences() -> None:
    from ccpo_lab.stats import paired_seeds_needed

    rows = compare_to_reference({"grpo": GRPO, "gigpo": GIGPO}, "grpo",
                                {"grpo": np.arange(3), "gigpo": np.arange(3)})
    (row,) = rows
    c = row.comparison
    d = GIGPO - GRPO
    assert c.test == "paired" and c.sd_diff == pytest.approx(np.std(d, ddof=1))
    assert c.se == pytest.approx(np.std(d, ddof=1) / math.sqrt(3))
    assert row.power_alpha == 0.05  # one comparison: alpha / 1
    assert row.seeds_needed == paired_seeds_needed(d.mean(), np.std(d, ddof=1), 0.05, 0.8,
                                                   two_sided=True)
    welch = seeds_needed(d.mean(), np.std(GIGPO, ddof=1), np.std(GRPO, ddof=1), 0.05, 0.8,
                         two_sided=True)
    assert row.seeds_needed == 4 and welch == 19  # the paired test needs far fewer seeds
    ref = sps.ttest_rel(GIGPO, GRPO)
    assert c.p_value == pytest.approx(ref.pvalue)


def test_power_at_the_family_level_alpha_over_m() -> None:
    values = {"ref": GRPO, "a": GIGPO, "b": GRPO - 1.0 + np.array([0.5, -0.3, 0.1])}
    seeds = {k: np.arange(3) for k in values}
    rows = compare_to_reference(values, "ref", seeds)
    assert all(r.power_alpha == pytest.approx(0.025) for r in rows)
    from ccpo_lab.stats import paired_seeds_needed

    a = rows[0].comparison
    assert rows[0].seeds_needed == paired_seeds_needed(a.diff, a.sd_diff, 0.025, 0.8,
                                                       two_sided=True)


def test_unresolved_always_needs_more_seeds_than_it_has() -> None:
    # the coherence rule of the report: a comparison its own test leaves unresolved (Holm)
    # never shows a seeds-needed figure at or below its seed count
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(300):
        n = int(rng.integers(2, 9))
        base = rng.normal(50.0, 5.0, n)
        values = {"ref": base, **{f"a{k}": base + rng.normal(rng.normal(0, 3), 2.0, n)
                                  for k in range(3)}}
        paired = rng.random() < 0.5
        seeds = {k: np.arange(n) if paired else np.arange(n) + (100 if k != "ref" else 0)
                 for k in values}
        for r in compare_to_reference(values, "ref", seeds):
            if r.verdict.label == "unresolved" and r.seeds_needed is not None:
                have = r.comparison.n_pairs if paired else min(r.comparison.n_x,
                                                               r.comparison.n_y)
                assert r.seeds_needed > have, (n, r)
                checked += 1
    assert checked > 300
