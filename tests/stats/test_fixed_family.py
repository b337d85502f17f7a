"""The fixed-seed family (issue 31): Holm's step-down at Šidák's levels over each
comparison's own test, the ranks' maximum test calibrated for unpaired comparisons; and
the same verdicts as the adaptive design's default rule with one look, study by study."""

from __future__ import annotations

import numpy as np
import pytest

from ccpo_lab.adaptive.simulate import default_design, run_design
from ccpo_lab.stats import compare_pairs, holm
from ccpo_lab.stats.fixed_family import calibrated_p, holm_sidak

ARMS = ["ref", "a", "b", "c", "d"]


def test_holm_sidak_by_hand() -> None:
    p = np.array([0.01, 0.04, np.nan, 0.03, 0.5])
    # sorted 0.01 (4 left), 0.03 (3), 0.04 (2), 0.5 (1); nan not counted
    expect = [1 - 0.99**4, max(1 - 0.96**2, 1 - 0.97**3), np.nan, 1 - 0.97**3, 0.5]
    np.testing.assert_allclose(holm_sidak(p), expect, rtol=1e-12)
    assert np.all(holm_sidak(p)[[0, 1, 3, 4]] <= holm(p)[[0, 1, 3, 4]])
    assert np.isnan(holm_sidak([np.nan, np.nan])).all()
    assert holm_sidak([1.0, 1.0]).tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm_sidak([0.2, 1.5])


def test_the_calibrated_max_test_holds_its_level_at_every_least_favourable_variance(
        ) -> None:
    """On fresh null draws (not the calibration's) at each variance ratio the p is
    calibrated on (7 and 9 seeds: both arms' sd varied), P(calibrated p <= q) is at most
    q, and about q at the least favourable one (the p is the largest of theirs); the max
    test's raw p is not calibrated (it is the smaller of two)."""
    from ccpo_lab.stats.compare import compare_arms
    from ccpo_lab.stats.fixed_family import comparison_p
    from ccpo_lab.stats.joint import max_test_p, own_p, rank_t
    from ccpo_lab.stats.sequential import unequal_sds

    rng = np.random.default_rng(2031)
    n, qs = 4_000, (0.05, 0.2, 0.5)
    sds = unequal_sds(False)
    assert len(sds) == 7
    rates = np.empty((len(sds), len(qs)))
    for i, (sd_x, sd_y) in enumerate(sds):
        x, y = sd_x * rng.standard_normal((n, 7)), sd_y * rng.standard_normal((n, 9))
        raw = max_test_p(own_p(x, y, False), x.mean(axis=1) - y.mean(axis=1),
                         *rank_t(x, y, False, variance="own"))
        cal = np.array([calibrated_p(float(p), 7, 9) for p in raw])
        rates[i] = [np.mean(cal <= q) for q in qs]
    se = np.sqrt(np.array(qs) * (1 - np.array(qs)) / n)
    print("\nP(calibrated p <= q), q = 0.05, 0.2, 0.5, per (sd_x, sd_y):",
          dict(zip(sds, np.round(rates, 4).tolist(), strict=True)))
    assert np.all(rates <= np.array(qs) + 3.5 * se), rates
    assert np.all(rates.max(axis=0) >= np.array(qs) - 3.5 * se), rates
    for _ in range(5):  # a report's path: compare_arms, then the calibrated max test
        x, y = 3.0 * rng.standard_normal(7), rng.standard_normal(9)
        t_r, df_r = rank_t(x, y, False, variance="own")
        p = float(max_test_p(own_p(x, y, False), x.mean() - y.mean(), t_r, df_r))
        assert comparison_p(compare_arms(x, y), x, y) == pytest.approx(
            calibrated_p(p, 7, 9), abs=1e-12)
    assert np.isnan(calibrated_p(np.nan, 7, 9)) and np.isnan(calibrated_p(0.1, 1, 9))


@pytest.mark.parametrize("test", ["paired", "unpaired"])
def test_a_fixed_report_and_a_one_look_design_agree(test: str) -> None:
    """The issue's requirement: the fixed-seed family and the adaptive design's default
    rule never disagree on the same data (but within the two calibrations' Monte-Carlo
    error of alpha, which the loop counts and skips). 150 studies of 8 seeds, 4 comparisons, effects
    from none to large, a seed effect (paired) or none; the design is the default one
    with a single look at 8 seeds."""
    rng = np.random.default_rng(31 if test == "paired" else 32)
    studies, n = 150, 8
    effects = rng.choice([0.0, 0.0, 0.8, 1.5, 2.5], size=(studies, len(ARMS)))
    effects[:, 0] = 0.0
    shared = rng.standard_normal((studies, 1, n)) if test == "paired" else 0.0
    x = effects[:, :, None] + shared + rng.standard_normal((studies, len(ARMS), n))
    design = default_design(ARMS, test=test, initial_seeds=tuple(range(n)), max_seeds=n)
    assert design.planned_seeds() == (n,) and design.variance == "own"
    claims = run_design(design, x, ARMS).claims
    seeds = np.arange(n) if test == "paired" else None
    decided = at_alpha = 0
    for s in range(studies):
        values = {arm: x[s, i] for i, arm in enumerate(ARMS)}
        rows = compare_pairs(values, [(a, "ref") for a in ARMS[1:]],
                             {a: seeds for a in ARMS} if seeds is not None else None)
        p_adj = np.array([r.p_holm for r in rows])
        if np.any(np.abs(p_adj - design.alpha) < 0.001):
            at_alpha += 1  # within the calibrations' Monte-Carlo error of alpha
            continue
        verdicts = [{"better": 1, "worse": -1}.get(r.verdict.label, 0) for r in rows]
        assert verdicts == claims[s].tolist(), (s, p_adj)
        decided += int(np.count_nonzero(claims[s]))
    print(f"\n{test}: {decided} comparisons decided alike, {at_alpha} studies at alpha")
    assert at_alpha < studies // 10
    assert decided > 100  # the check is not vacuous: many comparisons were decided


@pytest.mark.parametrize(("test", "noisy"), [("paired", 1), ("unpaired", 1),
                                             ("unpaired", 0)])
def test_the_fixed_family_holds_when_the_arms_vary_unequally(test: str, noisy: int) -> None:
    """The report's family rests on each comparison's own variance: one arm whose sd is 4
    times the others' (an arm that collapses in some seeds), or the reference's a quarter
    of theirs, does not lift the family-wise error above alpha (1,500 null studies of 6
    seeds, 4 comparisons)."""
    rng = np.random.default_rng(4 if test == "paired" else 5 + noisy)
    studies, n = 1_500, 6
    shared = rng.standard_normal((studies, 1, n)) if test == "paired" else 0.0
    x = shared + rng.standard_normal((studies, len(ARMS), n))
    x[:, noisy] *= 4.0 if noisy else 0.25
    seeds = {a: np.arange(n) for a in ARMS} if test == "paired" else None
    false = 0
    for s in range(studies):
        rows = compare_pairs({a: x[s, i] for i, a in enumerate(ARMS)},
                             [(a, "ref") for a in ARMS[1:]], seeds)
        false += any(r.verdict.label != "unresolved" for r in rows)
    rate = false / studies
    print(f"\nfixed family, {test}, arm {noisy}'s sd x{4.0 if noisy else 0.25:g}, "
          f"{studies} null studies: FWER {rate:.3f}")
    assert rate <= 0.05 + 2.5 * np.sqrt(0.05 * 0.95 / studies), rate
