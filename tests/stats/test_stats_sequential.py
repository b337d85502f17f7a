"""Group-sequential statistics: spending, boundaries, t calibration, Holm step-down, power."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from ccpo_lab.stats import holm, seeds_needed, welch_type2_error
from ccpo_lab.stats.sequential import (
    SPENDING_FUNCTIONS,
    alpha_spent,
    calibrated_levels,
    futile,
    information,
    nominal_table,
    normal_boundaries,
    normal_nominal_levels,
    planned_information,
    seeds_needed_at,
    step_down,
    t_boundary,
    t_test_power,
    unequal_sds,
)


def test_spending_functions_end_at_alpha_and_grow() -> None:
    t = np.linspace(0.05, 1.0, 40)
    for name in SPENDING_FUNCTIONS:
        a = alpha_spent(t, 0.05, name)
        assert a[-1] == 0.05
        assert np.all(np.diff(a) > 0) and a[0] > 0
    # O'Brien-Fleming spends almost nothing early, Pocock much more
    early = [alpha_spent([0.25], 0.05, n)[0] for n in ("obrien-fleming", "pocock")]
    assert early[0] < 1e-4 < 0.01 < early[1]
    pocock = 0.05 * math.log(1 + (math.e - 1) * 0.5)
    assert alpha_spent([0.5], 0.05, "pocock")[0] == pytest.approx(pocock)
    assert alpha_spent([1.3], 0.05)[0] == 0.05  # fractions above 1 count as 1


def test_spending_errors() -> None:
    with pytest.raises(ValueError, match="obrien-fleming, pocock"):
        alpha_spent([0.5], 0.05, "haybittle")
    with pytest.raises(ValueError, match="alpha"):
        alpha_spent([0.5], 1.5)
    with pytest.raises(ValueError, match="fractions"):
        alpha_spent([0.0, 1.0], 0.05)


def test_obrien_fleming_boundaries_match_published_values() -> None:
    # Lan-DeMets O'Brien-Fleming type, 4 equally spaced looks, two-sided 0.05: the values
    # printed by the R packages ldbounds and gsDesign
    c = normal_boundaries([1, 2, 3, 4], 4, 0.05)
    assert c == pytest.approx([4.3326, 2.9631, 2.3590, 2.0141], abs=2e-4)
    # one look is the fixed test
    assert normal_boundaries([5], 5, 0.05)[0] == pytest.approx(1.959964, abs=1e-6)


@pytest.mark.parametrize("spending", sorted(SPENDING_FUNCTIONS))
def test_normal_boundaries_spend_the_alpha_by_simulation(spending: str) -> None:
    info = np.array([3.0, 5.0, 9.0, 12.0])  # unequal spacing
    c = normal_boundaries(info, 12, 0.05, spending)
    rng = np.random.default_rng(7)
    n = 400_000
    inc = rng.standard_normal((n, 4)) * np.sqrt(np.diff(info, prepend=0.0))
    z = np.cumsum(inc, axis=1) / np.sqrt(info)
    crossed = np.logical_or.accumulate(np.abs(z) >= c, axis=1).mean(axis=0)
    spent = alpha_spent(info / 12, 0.05, spending)
    se = np.sqrt(spent * (1 - spent) / n)
    assert np.all(np.abs(crossed - spent) <= 4 * se + 1e-6)


def test_normal_boundaries_final_spends_all_and_validates() -> None:
    # a last look short of the plan spends the full alpha when it is final
    short = normal_nominal_levels([3, 6, 9, 11], 12, 0.05, final=True)
    plain = normal_nominal_levels([3, 6, 9, 11], 12, 0.05, final=False)
    assert short[-1] > plain[-1]
    assert np.allclose(short[:-1], plain[:-1])
    with pytest.raises(ValueError, match="increasing"):
        normal_boundaries([3, 3, 6], 12)


def test_information_and_planned_schedule() -> None:
    assert planned_information(3, 3, 12) == (3, 6, 9, 12)
    assert planned_information(3, 4, 12) == (3, 7, 11, 12)
    assert planned_information(4, 3, 4) == (4,)
    assert information(((3, 3), (6, 6)), "paired").tolist() == [3.0, 6.0]
    assert information(((2, 6),), "welch")[0] == pytest.approx(3.0)


def test_calibrated_first_paired_look_is_exact_and_levels_are_deterministic() -> None:
    sizes = ((3, 3), (6, 6), (9, 9), (12, 12))
    lv = calibrated_levels(sizes, 12, [0.05, 0.025])
    assert lv.shape == (2, 4)
    assert lv[0, 0] == alpha_spent([0.25], 0.05)[0]  # a single t-test is exact
    assert np.array_equal(lv, calibrated_levels(sizes, 12, [0.05, 0.025]))
    # a larger level never has a stricter boundary (what Holm's shortcut needs)
    table = nominal_table([3, 6, 9, 12], 12, 0.05, 4)
    assert np.all(np.diff(table, axis=1) < 0)
    # a look's level does not depend on the looks planned after it
    prefix = calibrated_levels(sizes[:2], 12, [0.05])
    assert np.array_equal(prefix[0], lv[0, :2])


def test_calibrated_levels_fix_the_small_sample_excess() -> None:
    """Independent null studies: the calibrated levels spend alpha, the normal ones more."""
    looks = [3, 6, 9, 12]
    cal = calibrated_levels(tuple((n, n) for n in looks), 12, [0.05])[0]
    nor = normal_nominal_levels(looks, 12, 0.05, final=True)
    rng = np.random.default_rng(99)  # not the calibration's seed
    n_studies = 300_000
    d = rng.standard_normal((n_studies, 12))
    p = np.empty((n_studies, 4))
    for k, n in enumerate(looks):
        x = d[:, :n]
        t = x.mean(axis=1) / (x.std(axis=1, ddof=1) / np.sqrt(n))
        p[:, k] = 2 * special.stdtr(n - 1, -np.abs(t))
    rate_cal = float((p <= cal).any(axis=1).mean())
    rate_nor = float((p <= nor).any(axis=1).mean())
    se = math.sqrt(0.05 * 0.95 / n_studies)
    assert abs(rate_cal - 0.05) <= 3 * se, rate_cal
    assert rate_nor > 0.05 + 3 * se, rate_nor  # the significance-level approach lets more through


def test_calibrated_welch_levels_by_simulation() -> None:
    """Fresh null studies at each ratio of variances the Welch levels are calibrated on:
    none lets more than alpha through, and the least favourable lets about alpha."""
    sizes = ((3, 3), (6, 6), (9, 9))
    lv = calibrated_levels(sizes, 9, [0.05], "pocock", final=True, test="welch")[0]
    rng = np.random.default_rng(5)
    n_studies = 100_000
    rates = []
    for sd_x, sd_y in unequal_sds(True):
        x = rng.standard_normal((n_studies, 9)) * sd_x
        y = rng.standard_normal((n_studies, 9)) * sd_y
        hit = np.zeros(n_studies, dtype=bool)
        for k, (n, _) in enumerate(sizes):
            a, b = x[:, :n].var(axis=1, ddof=1) / n, y[:, :n].var(axis=1, ddof=1) / n
            df = (a + b) ** 2 / (a * a / (n - 1) + b * b / (n - 1))
            t = (x[:, :n].mean(axis=1) - y[:, :n].mean(axis=1)) / np.sqrt(a + b)
            hit |= 2 * special.stdtr(df, -np.abs(t)) <= lv[k]
        rates.append(float(hit.mean()))
    se = math.sqrt(0.05 * 0.95 / n_studies)
    assert max(rates) <= 0.05 + 3 * se, rates
    assert max(rates) >= 0.05 - 3 * se, rates


def test_calibrated_levels_validate_sizes() -> None:
    with pytest.raises(ValueError, match="paired"):
        calibrated_levels(((3, 4),), 12, [0.05])
    with pytest.raises(ValueError, match="grow"):
        calibrated_levels(((3, 3), (3, 3)), 12, [0.05])
    with pytest.raises(ValueError, match=">= 2"):
        calibrated_levels(((1, 1), (3, 3)), 12, [0.05])
    with pytest.raises(ValueError, match="test"):
        calibrated_levels(((3, 3),), 12, [0.05], test="z")  # type: ignore[arg-type]


def test_t_boundary() -> None:
    assert t_boundary(0.05, 1e9) == pytest.approx(1.959964, abs=1e-5)
    assert t_boundary(0.05, 11) == pytest.approx(2.200985, abs=1e-5)
    assert t_boundary(0.0, 5) == math.inf
    assert math.isnan(t_boundary(0.05, 0))


def test_t_test_power_agrees_with_colas_welch_power() -> None:
    for eps, s1, s2, n in [(1.0, 1.0, 2.0, 5), (0.3, 0.5, 0.5, 12), (2.0, 1.0, 0.0, 3)]:
        beta = welch_type2_error(eps, s1, s2, n, 0.05, two_sided=True)
        assert t_test_power(eps, s1 ** 2, s2 ** 2, n, 0.05) == pytest.approx(1 - beta)
    # paired: var_b = 0 gives df n - 1
    pw = t_test_power(1.0, 1.0, 0.0, 10, 0.05)
    crit = special.stdtrit(9, 0.975)
    assert pw == pytest.approx(1 - special.stdtr(9, crit - 1.0 * math.sqrt(10)))
    assert np.isnan(t_test_power(1.0, 0.0, 0.0, 10, 0.05))
    assert np.isnan(t_test_power(1.0, 1.0, 0.0, 1, 0.05))


def test_seeds_needed_at() -> None:
    # Welch variances: the same as the report's Colas figure at the same level
    assert seeds_needed_at(1.0, 1.0, 4.0, 0.05, 0.8) == seeds_needed(1.0, 1.0, 2.0, 0.05, 0.8,
                                                                     two_sided=True)
    n = seeds_needed_at(0.5, 1.0, 0.0, 0.02, 0.8)
    assert n is not None
    assert t_test_power(0.5, 1.0, 0.0, n, 0.02) >= 0.8 > t_test_power(0.5, 1.0, 0.0, n - 1, 0.02)
    assert seeds_needed_at(0.0, 1.0, 0.0, 0.05, 0.8) is None
    assert seeds_needed_at(float("nan"), 1.0, 0.0, 0.05, 0.8) is None
    assert seeds_needed_at(0.001, 1.0, 0.0, 0.05, 0.8, n_max=50) is None


def test_step_down_at_one_look_is_holm() -> None:
    rng = np.random.default_rng(3)
    m = 4
    p = rng.uniform(0, 0.06, size=(500, m)) ** 1.5
    nominal = np.broadcast_to((0.05 / np.arange(1, m + 1))[None, None, :], (1, m, m))
    now, family = step_down(p, np.ones_like(p, dtype=bool), np.zeros_like(p, dtype=bool),
                            nominal)
    expected = np.array([holm(row) <= 0.05 for row in p])
    assert np.array_equal(now, expected)
    assert np.all((family >= 1) & (family <= m))


def test_step_down_counts_earlier_rejections_and_skips_untestable() -> None:
    m = 3
    nominal = np.broadcast_to((0.05 / np.arange(1, m + 1))[None, None, :], (1, m, m))
    p = np.array([[0.001, 0.04, 0.02]])
    # nothing rejected before: 0.001 <= 0.05/3, then 0.02 <= 0.025, then 0.04 <= 0.05
    now, family = step_down(p, np.ones((1, 3), bool), np.zeros((1, 3), bool), nominal)
    assert now.tolist() == [[True, True, True]]
    assert family.tolist() == [[3, 1, 2]]
    # the second is not testable now (e.g. closed for futility): it keeps its share
    p2 = np.array([[0.001, 0.04, 0.03]])
    now, family = step_down(p2, np.array([[True, False, True]]), np.zeros((1, 3), bool),
                            nominal)
    assert now.tolist() == [[True, False, False]]  # 0.03 > 0.05/2
    assert family.tolist() == [[3, 2, 2]]
    # the first was rejected at an earlier look: r starts at 2
    now, _ = step_down(p, np.array([[False, True, True]]), np.array([[True, False, False]]),
                       nominal)
    assert now.tolist() == [[False, True, True]]
    # nan p is never rejected
    now, _ = step_down(np.array([[np.nan, 0.0, 1.0]]), np.ones((1, 3), bool),
                       np.zeros((1, 3), bool), nominal)
    assert now.tolist() == [[False, True, False]]


def test_step_down_shapes() -> None:
    with pytest.raises(ValueError, match="shape"):
        step_down(np.zeros((2, 3)), np.ones((2, 3), bool), np.zeros((2, 3), bool),
                  np.zeros((1, 3, 2)))
    with pytest.raises(ValueError, match="shape"):
        step_down(np.zeros(3), np.ones(3, bool), np.zeros(3, bool), np.zeros((1, 3, 3)))


def test_futile_rule() -> None:
    # at n = 6 (df 5): no difference, t = 1, a large difference, nan
    diff = np.array([[0.0, 0.1, 1.0, np.nan]])
    se = np.full((1, 4), 0.1)
    df = np.full((1, 4), 5.0)
    va = (se * np.sqrt(6)) ** 2
    vb = np.zeros((1, 4))
    level = np.full((1, 4), 0.04)
    point = futile(diff, se, df, va, vb, 12, level, 0.8, 0.5)
    optimistic = futile(diff, se, df, va, vb, 12, level, 0.8, 0.95)
    # no difference: futile either way; t = 1: futile on the point estimate only (its
    # optimistic bound 0.1 + 2.015 * 0.1 could be resolved); large or nan: never
    assert point.tolist() == [[True, True, False, False]]
    assert optimistic.tolist() == [[True, False, False, False]]
    # confidence 0.5 is the power of the observed difference itself
    pw = t_test_power(0.1, va[0, 1], 0.0, 12, 0.04)
    assert (pw < 0.8) == point[0, 1]
