"""Per-run summaries: converged window, best evaluation, binomial se, interim flag, rise."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from ccpo_lab.stats import (
    best_evaluation,
    binomial_se,
    expected_max_normal,
    is_interim,
    rise_over_start,
    window_summary,
)

STEPS = np.array([5, 10, 65, 70, 75, 80])
VALUES = np.array([0.10, 0.20, 0.50, 0.80, 0.90, 0.70])


def test_window_summary_hand_computed() -> None:
    # window step >= 70: values 0.8, 0.9, 0.7 -> mean 0.8;
    # deviations 0, 0.1, -0.1 -> sum of squares 0.02 -> var 0.02/2 = 0.01 -> sd 0.1
    w = window_summary(STEPS, VALUES, window_start=70)
    assert w.n == 3
    assert w.mean == pytest.approx(0.8)
    assert w.sd == pytest.approx(0.1)
    assert w.window_start == 70


def test_window_summary_order_and_nan() -> None:
    perm = np.array([5, 3, 0, 4, 1, 2])
    values = VALUES.copy()
    values[1] = np.nan  # step 10, outside the window anyway
    w = window_summary(STEPS[perm], values[perm], window_start=70)
    assert (w.n, w.mean) == (3, pytest.approx(0.8))
    values[4] = np.nan  # step 75 missing: window 0.8, 0.7 -> mean 0.75, sd sqrt(0.005)
    w = window_summary(STEPS, values, window_start=70)
    assert w.n == 2
    assert w.mean == pytest.approx(0.75)
    assert w.sd == pytest.approx(math.sqrt(0.005))


def test_window_summary_degenerate() -> None:
    one = window_summary(STEPS, VALUES, window_start=80)  # only step 80
    assert one.n == 1 and one.mean == pytest.approx(0.7) and math.isnan(one.sd)
    none = window_summary(STEPS, VALUES, window_start=100)
    assert none.n == 0 and math.isnan(none.mean) and math.isnan(none.sd)
    empty = window_summary([], [], window_start=70)
    assert empty.n == 0 and math.isnan(empty.mean)


def test_window_summary_rejects_malformed() -> None:
    with pytest.raises(ValueError):
        window_summary([1, 2], [0.1], 0)
    with pytest.raises(ValueError):
        window_summary([1.5, 2.0], [0.1, 0.2], 0)


def test_expected_max_normal_closed_forms() -> None:
    # E[max of 2] = 1/sqrt(pi); E[max of 3] = 3/(2 sqrt(pi)) (classical results)
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), abs=1e-9)
    assert expected_max_normal(3) == pytest.approx(1.5 / math.sqrt(math.pi), abs=1e-9)
    # protocol: "about 1.5 sd for n = 9"; tabulated value 1.4850
    assert expected_max_normal(9) == pytest.approx(1.4850, abs=5e-5)
    assert math.isnan(expected_max_normal(0))


def test_expected_max_normal_matches_simulation() -> None:
    rng = np.random.default_rng(7)
    draws = rng.standard_normal((200_000, 5)).max(axis=1)
    # se of the simulated mean ~ 0.67/sqrt(2e5) ~ 0.0015
    assert expected_max_normal(5) == pytest.approx(draws.mean(), abs=0.006)
    # and the order statistic expectation is increasing in n
    assert np.all(np.diff([expected_max_normal(n) for n in range(1, 40)]) > 0)


def test_best_evaluation_with_bias() -> None:
    b = best_evaluation(STEPS, VALUES, window_start=70)
    # window 0.8, 0.9, 0.7: max 0.9 at step 75, sd 0.1, bias = E[max of 3] * 0.1
    assert (b.step, b.value, b.n) == (75, pytest.approx(0.9), 3)
    assert b.bias_sd_units == pytest.approx(1.5 / math.sqrt(math.pi))
    assert b.bias == pytest.approx(0.1 * 1.5 / math.sqrt(math.pi))
    # over all six evaluations the same maximum, with n = 6
    assert best_evaluation(STEPS, VALUES).n == 6


def test_best_evaluation_ties_and_degenerate() -> None:
    b = best_evaluation([30, 10, 20], [0.5, 0.9, 0.9])
    assert b.step == 10  # earliest of the tied maxima
    one = best_evaluation([10], [0.4])
    assert (one.n, one.bias_sd_units) == (1, 0.0) and math.isnan(one.bias)
    none = best_evaluation([10], [np.nan])
    assert none.step == -1 and math.isnan(none.value) and math.isnan(none.bias_sd_units)


def test_ccpo_card_anchor() -> None:
    # CCPO card, first arm: window mean 90.0, sd 3.1, n = 9; best single evaluation 96.1.
    # Expected optimism of a maximum of 9: 1.4850 * 3.1 = 4.60 points, so "expected best"
    # under pure noise is 94.6; the reported best is (96.1 - 90.0) / 3.1 = 1.97 sd above.
    bias = expected_max_normal(9) * 3.1
    assert bias == pytest.approx(4.60, abs=0.01)
    z_best = (96.1 - 90.0) / 3.1
    assert z_best == pytest.approx(1.97, abs=0.01)


def test_binomial_se() -> None:
    # sqrt(0.9 * 0.1 / 128) = sqrt(0.000703125) = 0.026517
    se = binomial_se(0.9, 128)
    assert se == pytest.approx(0.026517, abs=1e-6)
    # 95% half-width ~ 1.96 * se ~ 0.052: "about +/-5 points"
    assert sps.norm.ppf(0.975) * se == pytest.approx(0.052, abs=0.001)
    arr = binomial_se(np.array([0.0, 0.5, 1.0, 1.5, np.nan]), 100)
    np.testing.assert_allclose(arr[:3], [0.0, 0.05, 0.0])
    assert np.isnan(arr[3:]).all()
    assert math.isnan(binomial_se(0.5, 0))


def test_is_interim() -> None:
    assert is_interim([5, 10, 145], final_step=150)
    assert not is_interim([150, 5, 10], final_step=150)
    assert is_interim([], final_step=150)


def test_ocar_last_point_versus_window() -> None:
    # post-mortem: the last point gained +8.6 while the mean of the last three gained +0.5.
    # y last three 84, 88, 80 (mean 84); x last three 84.0, 80.9, 88.6 (mean 84.5)
    steps = np.array([140, 145, 150])
    x = window_summary(steps, [84.0, 80.9, 88.6], window_start=140)
    y = window_summary(steps, [84.0, 88.0, 80.0], window_start=140)
    last_point_gain = 88.6 - 80.0
    assert last_point_gain == pytest.approx(8.6)
    assert x.mean - y.mean == pytest.approx(0.5)


def test_rise_over_start_hand_computed() -> None:
    # d = (0.3, 0.1); var = 0.16/100 + 0.25/400 and 0.21/100 + 0.24/100
    r = rise_over_start([0.2, 0.3], [0.5, 0.4], [100, 100], [4, 1])
    assert (r.start, r.window, r.rise) == pytest.approx((0.25, 0.45, 0.2))
    assert r.se == pytest.approx(math.sqrt(0.002225 + 0.0045) / 2)
    assert r.z == pytest.approx(0.2 / (math.sqrt(0.006725) / 2))
    assert (r.n_seeds, r.n_rose) == (2, 2)


def test_rise_over_start_drops_incomplete_seeds_and_counts_falls() -> None:
    nan = float("nan")
    r = rise_over_start([0.5, nan, 0.4], [0.25, 0.9, 0.5], [16, 16, 16], [1, 2, 0])
    assert (r.n_seeds, r.n_rose, r.rise) == (1, 0, -0.25)  # seed 1: no start; seed 2: no window
    assert r.se == pytest.approx(math.sqrt(0.25 / 16 + 0.1875 / 16)) and r.z < 0
    unknown = rise_over_start([0.2], [0.5], [nan], [3])
    assert unknown.rise == pytest.approx(0.3) and math.isnan(unknown.se)
    assert math.isnan(unknown.z)
    empty = rise_over_start([], [], [], [])
    assert empty.n_seeds == 0 and math.isnan(empty.rise)
    with pytest.raises(ValueError, match="one shape"):
        rise_over_start([0.1, 0.2], [0.3], [10], [1])
