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


def test_the_calibrated_max_test_is_uniform_under_the_null() -> None:
    """On fresh null draws (not the calibration's), P(calibrated p <= q) is q; the max
    test's raw p is not (it is the smaller of two)."""
    from ccpo_lab.stats.compare import compare_arms
    from ccpo_lab.stats.fixed_family import comparison_p

    rng = np.random.default_rng(2031)
    n = 4_000
    cal = np.empty(n)
    for i in range(n):
        x, y = rng.standard_normal(7), rng.standard_normal(9)
        cal[i] = comparison_p(compare_arms(x, y), x, y)
    for q in (0.05, 0.2, 0.5):
        rate = float(np.mean(cal <= q))
        assert abs(rate - q) < 3.5 * np.sqrt(q * (1 - q) / n), (q, rate)
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


@pytest.mark.parametrize("test", ["paired", "unpaired"])
def test_the_fixed_family_holds_when_one_arm_varies_4_times_as_much(test: str) -> None:
    """The report's family rests on each comparison's own variance: one arm whose sd is 4
    times the others' (an arm that collapses in some seeds) does not lift the family-wise
    error above alpha (1,500 null studies of 6 seeds, 4 comparisons)."""
    rng = np.random.default_rng(4 if test == "paired" else 5)
    studies, n = 1_500, 6
    shared = rng.standard_normal((studies, 1, n)) if test == "paired" else 0.0
    x = shared + rng.standard_normal((studies, len(ARMS), n))
    x[:, 1] *= 4.0
    seeds = {a: np.arange(n) for a in ARMS} if test == "paired" else None
    false = 0
    for s in range(studies):
        rows = compare_pairs({a: x[s, i] for i, a in enumerate(ARMS)},
                             [(a, "ref") for a in ARMS[1:]], seeds)
        false += any(r.verdict.label != "unresolved" for r in rows)
    rate = false / studies
    print(f"\nfixed family, {test}, one arm's sd 4x, {studies} null studies: FWER {rate:.3f}")
    assert rate <= 0.05 + 2.5 * np.sqrt(0.05 * 0.95 / studies), rate
