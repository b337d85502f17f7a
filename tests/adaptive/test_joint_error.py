"""The default rule's family-wise error on scores the normal model does not cover.

The joint boundary is calibrated on normal scores; its guarantee on other laws is
measured here by Monte-Carlo: 5 arms (4 comparisons with the reference), looks at
3/6/9/12 seeds, alpha 0.05, the null (every arm the reference's law), scores log-normal
(sigma 1, skewness 6) or bimodal (25% failed seeds near 0), with the declared test that
fits (paired with a shared seed effect, unpaired without). 6000 studies a case: the
Monte-Carlo se of a rate of 0.05 is 0.0028, and the bound alpha + 2.5 se = 0.057 would
catch a rule that is 0.015 too liberal; the same studies tested without the family's
correction (each comparison at alpha) exceed it by far, so the check can fail.

Measured at 40,000 studies (issue 31): bimodal paired 0.054 (the normal calibration is
slightly liberal there, most at the first looks); unpaired, with its default
``mean-or-rank`` statistic, bimodal 0.0527 ± 0.0011 (0.0507 with ``statistic: mean``) and
log-normal 0.0386 (0.0331); paired log-normal 0.03-0.04. At 6,000 studies (this test,
2026-12-04), log-normal and bimodal: paired 0.038 and 0.055, unpaired 0.036 and 0.054.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ccpo_lab.adaptive.simulate import default_design, run_design

ARMS = ["ref", "a", "b", "c", "d"]
ALPHA = 0.05
N = 6000


def _lognormal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.lognormal(0.0, 1.0, shape)


def _bimodal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    failed = rng.random(shape) < 0.25
    return np.where(failed, rng.normal(0.0, 0.02, shape), rng.normal(0.6, 0.1, shape))


@pytest.mark.parametrize("law", ["lognormal", "bimodal"])
@pytest.mark.parametrize("test", ["paired", "unpaired"])
def test_null_error_rate_on_non_normal_scores(law: str, test: str) -> None:
    rng = np.random.default_rng(31 + len(law) + len(test))
    draw = _lognormal if law == "lognormal" else _bimodal
    x = draw(rng, (N, len(ARMS), 12))
    if test == "paired":  # a seed effect shared by the arms (correlation about 0.5)
        x = x + draw(rng, (N, 1, 12))
    out = run_design(default_design(ARMS, test=test), x, ARMS)
    rate = float((out.claims != 0).any(axis=1).mean())
    bound = ALPHA + 2.5 * math.sqrt(ALPHA * (1 - ALPHA) / N)
    uncorrected = _uncorrected_rate(x, test)
    print(f"\n{law}, {test}, {N} null studies: FWER {rate:.4f} (bound {bound:.4f}); "
          f"4 uncorrected t-tests at 12 seeds "
          f"{uncorrected:.4f}")
    assert rate <= bound
    assert uncorrected > bound  # a rule without the family's correction would fail


def _uncorrected_rate(x: np.ndarray, test: str) -> float:
    """Any of the 4 comparisons' own t-tests at 12 seeds with p < alpha (no correction)."""
    from scipy import stats

    ref = x[:, :1, :]
    if test == "paired":
        p = stats.ttest_rel(x[:, 1:, :], np.broadcast_to(ref, x[:, 1:, :].shape), axis=2).pvalue
    else:
        p = stats.ttest_ind(x[:, 1:, :], np.broadcast_to(ref, x[:, 1:, :].shape), axis=2).pvalue
    return float((p < ALPHA).any(axis=1).mean())
