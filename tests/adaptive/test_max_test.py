"""The joint family's ``mean-or-rank`` statistic (issue 31): the ranks' t, the weighted
maximum test, its boundary, and what it does to error and power on simulated studies.

The ranks' t is checked against scipy's rank and t-test functions (an independent
transcription of the definitions); the error checks use laws the normal calibration does
not cover (discrete success rates with ties, log-normal scores with a better arm in the
family), and the power check fails if the ranks stop paying on skewed scores.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from ccpo_lab.adaptive import AdaptiveDesign, AdaptiveState, advance
from ccpo_lab.adaptive.simulate import default_design, run_design
from ccpo_lab.errors import UserError
from ccpo_lab.stats.joint import RANK_WEIGHT, joint_levels, max_test_p, rank_t

ARMS = ["ref", "a", "b", "c", "d"]
ALPHA = 0.05


def _bound(n: int) -> float:
    return ALPHA + 2.5 * math.sqrt(ALPHA * (1 - ALPHA) / n)


# --- the statistic ---------------------------------------------------------------------

def test_unpaired_rank_t_is_the_two_sample_t_of_joint_midranks() -> None:
    rng = np.random.default_rng(0)
    x = np.round(rng.normal(0.5, 1.0, 7), 1)  # rounded: ties within and across arms
    y = np.round(rng.normal(0.0, 1.0, 9), 1)
    r = stats.rankdata(np.concatenate([x, y]))
    want = stats.ttest_ind(r[:7], r[7:])
    t, df = rank_t(x, y, paired=False)
    assert float(t) == pytest.approx(want.statistic, rel=1e-12)
    assert float(df) == 14


def test_own_variance_rank_t_is_brunner_munzels() -> None:
    """``variance: own`` ranks an unpaired comparison with Brunner-Munzel's t: scipy's
    (an independent implementation), sign x - y, with ties, unequal sizes and batched;
    plain ranks (``ties=False``) give the same on continuous draws; nan where it is
    undefined (complete separation, fewer than 2 values)."""
    rng = np.random.default_rng(3)
    x = np.round(rng.normal(0.5, 3.0, (4, 7)), 0)  # ties within and across arms
    y = np.round(rng.normal(0.0, 1.0, (4, 9)), 0)
    t, df = rank_t(x, y, paired=False, variance="own")
    for i in range(4):
        want = stats.brunnermunzel(x[i], y[i])
        assert float(t[i]) == pytest.approx(-want.statistic, rel=1e-12)
        p = 2.0 * stats.t.sf(abs(float(t[i])), float(df[i]))
        assert p == pytest.approx(want.pvalue, rel=1e-9)
    u, v = rng.standard_normal((3, 6)), 4.0 * rng.standard_normal((3, 5))
    np.testing.assert_allclose(rank_t(u, v, False, ties=False, variance="own"),
                               rank_t(u, v, False, variance="own"), rtol=1e-12)
    sep, _ = rank_t(np.arange(4.0) + 10, np.arange(4.0), paired=False, variance="own")
    assert np.isnan(sep)
    assert np.isnan(rank_t(np.ones(1), np.arange(3.0), False, variance="own")[0])


def test_paired_rank_t_is_the_one_sample_t_of_signed_ranks() -> None:
    rng = np.random.default_rng(1)
    x, y = rng.normal(0.3, 1.0, 10), rng.normal(0.0, 1.0, 10)
    d = x - y
    want = stats.ttest_1samp(np.sign(d) * stats.rankdata(np.abs(d)), 0.0)
    t, df = rank_t(x, y, paired=True)
    assert float(t) == pytest.approx(want.statistic, rel=1e-12)
    assert float(df) == 9


def test_rank_t_ignores_a_monotone_rescaling_and_batches() -> None:
    rng = np.random.default_rng(2)
    x, y = rng.normal(0.4, 1.0, (3, 4, 6)), rng.normal(0.0, 1.0, (3, 4, 6))
    for paired in (False, True):
        t, _ = rank_t(x, y, paired)
        if not paired:  # ranks of the scores: any increasing map keeps them
            assert np.array_equal(t, rank_t(np.exp(3 * x), np.exp(3 * y), paired)[0])
        one = rank_t(x[1, 2], y[1, 2], paired)[0]
        assert float(t[1, 2]) == pytest.approx(float(one), rel=1e-12)


def test_rank_t_is_undefined_without_spread() -> None:
    t, _ = rank_t(np.ones(4), np.ones(4), paired=False)
    assert np.isnan(t)
    t, _ = rank_t(np.full(3, 2.0), np.zeros(3), paired=False)  # tied within each arm
    assert np.isnan(t)


def test_max_test_p_weights_the_ranks_and_keeps_the_mean_direction() -> None:
    df = np.array(10.0)
    t_r = np.array(3.0)
    p_r = 2 * stats.t.sf(3.0, 10)
    got = max_test_p(np.array(0.5), np.array(1.0), t_r, df)
    assert float(got) == pytest.approx(RANK_WEIGHT * p_r)
    # the mean's p is smaller: it stands
    assert float(max_test_p(np.array(1e-4), np.array(1.0), t_r, df)) == 1e-4
    # the ranks point the other way, or are undefined: the mean's p
    assert float(max_test_p(np.array(0.5), np.array(-1.0), t_r, df)) == 0.5
    assert float(max_test_p(np.array(0.5), np.array(1.0), np.array(np.nan), df)) == 0.5
    # no mean test (zero spread): no test
    assert np.isnan(max_test_p(np.array(np.nan), np.array(1.0), t_r, df))


def test_the_boundary_is_a_p_level_below_the_means() -> None:
    looks = (3, 6, 9, 12)
    mean = joint_levels(looks, 12, ALPHA, 4, "power-3", "unpaired")
    both = joint_levels(looks, 12, ALPHA, 4, "power-3", "unpaired", "mean-or-rank")
    assert both.shape == mean.shape == (4, 4)
    # two chances to cross cost a stricter level; one comparison alone is the strictest
    # family's least strict level
    assert (both[-1] < mean[-1]).all()
    assert (np.diff(both[-1]) < 0).all()
    with pytest.raises(ValueError, match="statistic"):
        joint_levels(looks, 12, ALPHA, 4, "power-3", "unpaired", "median")


# --- error and power -------------------------------------------------------------------

def test_null_error_on_tied_success_rates() -> None:
    """Success rates of 24 episodes (many seeds tie) with a spread of skills: the normal
    calibration does not cover them, the ranks' ties least of all."""
    n = 6000
    rng = np.random.default_rng(11)
    skill = np.clip(rng.normal(0.4, 0.12, (n, len(ARMS), 12)), 0.0, 1.0)
    x = rng.binomial(24, skill) / 24
    d = default_design(ARMS, test="unpaired")
    assert d.statistic == "mean-or-rank"
    rate = float((run_design(d, x, ARMS).claims != 0).any(axis=1).mean())
    print(f"\ntied success rates, unpaired mean-or-rank, {n} null studies: FWER {rate:.4f}")
    assert rate <= _bound(n)


def test_a_better_arm_does_not_raise_the_error_of_the_others() -> None:
    """Strong control: one arm far better on log-normal scores, three equal to the
    reference; claims about the three are errors."""
    n = 6000
    rng = np.random.default_rng(12)
    x = rng.lognormal(0.0, 1.0, (n, len(ARMS), 12))
    x[:, 1] += 3.0 * math.sqrt((math.e - 1) * math.e)  # +3 sd
    out = run_design(default_design(ARMS, test="unpaired"), x, ARMS)
    wrong = float((out.claims[:, 1:] != 0).any(axis=1).mean())
    print(f"\nlog-normal, one arm +3 sd: false claims on the equal arms {wrong:.4f}, "
          f"power {float((out.claims[:, 0] == 1).mean()):.3f}")
    assert wrong <= _bound(n)
    assert (out.claims[:, 0] == 1).mean() > 0.9


def test_the_ranks_buy_power_on_skewed_scores_and_cost_little_on_normal_ones() -> None:
    """The +1 sd arm of an alternative like the benchmark's, unpaired, 1,500 studies
    (Monte-Carlo se of the paired difference about 0.008), own variances (Brunner-Munzel's
    ranks, the least favourable variances): measured +0.039 on log-normal scores and
    -0.008 on normal ones (docs/adaptive-seeds.md; +0.09 and -0.004 with the rank-transform
    t calibrated where the arms vary alike, before the least favourable variances)."""
    n = 1500
    rng = np.random.default_rng(13)
    s2 = 0.8**2
    sd = math.sqrt((math.exp(s2) - 1) * math.exp(s2))
    effects = np.array([0.0, 1.0, 2.0, 0.0, 0.0])[None, :, None]
    laws = {"lognormal": lambda: (rng.lognormal(0.0, 0.8, (n, 5, 12)) / sd),
            "normal": lambda: rng.standard_normal((n, 5, 12))}
    gain = {}
    for law, draw in laws.items():
        x = draw() + effects
        hit = {st: run_design(default_design(ARMS, test="unpaired", statistic=st), x,
                              ARMS).claims[:, 0] == 1 for st in ("mean", "mean-or-rank")}
        gain[law] = float(hit["mean-or-rank"].mean() - hit["mean"].mean())
    print(f"\npower of mean-or-rank minus mean at +1 sd: {gain}")
    assert gain["lognormal"] > 0.02
    assert gain["normal"] > -0.03


# --- the design ------------------------------------------------------------------------

COMPS = (("a", "ref"), ("b", "ref"))


def test_the_default_statistic_follows_the_declared_test() -> None:
    assert AdaptiveDesign(COMPS, (0, 1, 2), test="unpaired").statistic == "mean-or-rank"
    assert AdaptiveDesign(COMPS, (0, 1, 2)).statistic == "mean"
    d = AdaptiveDesign(COMPS, (0, 1, 2), statistic="mean-or-rank")
    assert AdaptiveDesign.from_dict(d.to_dict()) == d


def test_a_bad_statistic_names_the_sweep_key() -> None:
    base = {"comparisons": [list(c) for c in COMPS], "initial_seeds": [0, 1, 2]}
    with pytest.raises(UserError, match="unknown statistic") as e:
        AdaptiveDesign.from_dict({**base, "statistic": "median"}, key="analysis.adaptive")
    assert e.value.key == "analysis.adaptive.statistic"
    assert e.value.value == "median"


def test_a_state_written_before_the_ranks_keeps_the_mean() -> None:
    d = AdaptiveDesign(COMPS, (0, 1, 2), test="unpaired")
    doc = json.loads(AdaptiveState(d).to_json())
    del doc["design"]["statistic"]
    old = AdaptiveState.from_json(json.dumps(doc))
    assert old.design.statistic == "mean"
    assert old.design.family == "joint"


def test_a_live_decision_says_both_statistics() -> None:
    d = AdaptiveDesign(COMPS, (0, 1, 2), test="unpaired")
    rng = np.random.default_rng(5)
    scores = {a: {k: float(v) for k, v in enumerate(rng.lognormal(0.0, 1.0, 12) + shift)}
              for a, shift in (("ref", 0.0), ("a", 6.0), ("b", 0.0))}
    s = AdaptiveState(d)
    while not s.finished:
        s = advance(s, scores)
    x = s.last_decisions()[("a", "ref")]
    assert x.action == "better"
    assert "ranks' t = " in x.reason and "p (mean or rank) = " in x.reason


# --- variance: own ---------------------------------------------------------------------

def _one_noisy_arm(test: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Null studies where arm ``a`` varies 4 times as much as the others (an arm that
    collapses in some seeds); paired with a shared seed effect."""
    rho = 0.5 if test == "paired" else 0.0
    x = rng.standard_normal((n, len(ARMS), 12)) * math.sqrt(1.0 - rho)
    x[:, 1] *= 4.0
    return x + rng.standard_normal((n, 1, 12)) * math.sqrt(rho)


@pytest.mark.parametrize("test", ["paired", "unpaired"])
def test_own_variances_hold_the_error_when_one_arm_is_noisier(test: str) -> None:
    """The pooled variance assumes the arms vary alike; ``variance: own`` does not (its
    boundary is calibrated for independent comparisons, the worst case of any
    variances). Measured at 6,000 studies: own 0.047 / 0.049, pooled 0.13 / 0.10."""
    n = 6000
    x = _one_noisy_arm(test, n, np.random.default_rng(21 + len(test)))
    rates = {v: float((run_design(default_design(ARMS, test=test, variance=v), x, ARMS)
                       .claims != 0).any(axis=1).mean()) for v in ("own", "pooled")}
    print(f"\n{test}, one arm 4x noisier, {n} null studies: FWER {rates}")
    assert rates["own"] <= _bound(n)
    assert rates["pooled"] > _bound(n)  # the check can fail: the pooled form does


@pytest.mark.parametrize("family", ["joint", "holm"])
def test_own_variances_hold_the_error_when_the_reference_varies_less(family: str) -> None:
    """Unpaired, arms independent, the reference's sd a quarter of the others': Welch's p
    and the ranks' are then further from exact than when the arms vary alike, the case a
    boundary calibrated only there missed (0.066 of 8,000 null studies, the joint family,
    before the least favourable variances of ``unequal_sds``). Measured: 0.054 (joint)
    and 0.055 (Holm) on these 6,000 studies; 0.0492 ± 0.0011 both on 40,000 others
    (0.031 and 0.035 where the arms vary alike: the price)."""
    n = 6000
    x = np.random.default_rng(77).standard_normal((n, len(ARMS), 12))
    x[:, 0] *= 0.25
    d = default_design(ARMS, test="unpaired", family=family)
    rate = float((run_design(d, x, ARMS).claims != 0).any(axis=1).mean())
    print(f"\nunpaired {family}, the reference's sd 1/4, {n} null studies: FWER {rate:.4f}")
    assert rate <= _bound(n)


def test_own_variance_decisions_live_match_the_simulation() -> None:
    comps = (("a", "ref"), ("b", "ref"), ("c", "ref"))
    arms = ["ref", "a", "b", "c"]
    for test in ("paired", "unpaired"):
        d = AdaptiveDesign(comparisons=comps, initial_seeds=(0, 1, 2), test=test,
                           variance="own")
        rng = np.random.default_rng(8)
        x = rng.standard_normal((8, 4, 12)) * np.array([1.0, 3.0, 1.0, 1.0])[None, :, None]
        x += np.array([0.0, 2.5, 1.8, -0.2])[None, :, None]
        out = run_design(d, x, arms)
        for i in range(x.shape[0]):
            scores = {a: {k: float(x[i, j, k]) for k in range(12)} for j, a in enumerate(arms)}
            s = AdaptiveState(d)
            while not s.finished:
                s = advance(s, scores)
            last = s.last_decisions()
            got = [{"better": 1, "worse": -1}.get(last[k].action, 0) for k in comps]
            assert got == out.claims[i].tolist(), (test, i)
            assert [len(s.assigned_seeds()[a]) for a in arms] == out.seeds[i].tolist()


def test_the_variance_setting_is_declared_and_old_states_keep_the_pool() -> None:
    assert AdaptiveDesign(COMPS, (0, 1, 2)).variance == "own"  # the default since issue 31
    base = {"comparisons": [list(c) for c in COMPS], "initial_seeds": [0, 1, 2]}
    with pytest.raises(UserError, match="unknown variance") as e:
        AdaptiveDesign.from_dict({**base, "variance": "welch"}, key="analysis.adaptive")
    assert e.value.key == "analysis.adaptive.variance"
    d = AdaptiveDesign(COMPS, (0, 1, 2), variance="pooled")
    assert AdaptiveDesign.from_dict(d.to_dict()) == d
    doc = json.loads(AdaptiveState(d).to_json())
    del doc["design"]["variance"]
    assert AdaptiveState.from_json(json.dumps(doc)).design.variance == "pooled"
