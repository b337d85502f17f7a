"""Arms' correlation across common seeds, with its Fisher-z interval (issue 31)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ccpo_lab.report.comparisons import correlation_note
from ccpo_lab.stats.correlation import seed_correlation


def test_correlation_on_common_seeds_with_its_interval() -> None:
    rng = np.random.default_rng(0)
    u = rng.normal(size=40)
    x, y = u + 0.5 * rng.normal(size=40), u + 0.5 * rng.normal(size=40)
    r, lo, hi, n = seed_correlation(x, y[::-1], np.arange(40), np.arange(40)[::-1])
    assert n == 40
    assert r == pytest.approx(float(np.corrcoef(x, y)[0, 1]))
    z = 1.959964 / math.sqrt(37)
    assert lo == pytest.approx(math.tanh(math.atanh(r) - z), abs=1e-6)
    assert hi == pytest.approx(math.tanh(math.atanh(r) + z), abs=1e-6)
    assert 0.4 < lo < r < hi  # true correlation 0.8


def test_too_few_seeds_or_no_spread() -> None:
    r, lo, _, n = seed_correlation([1.0, 2.0, 3.0], [1.0, 3.0, 2.0], [0, 1, 2], [0, 1, 2])
    assert n == 3 and np.isfinite(r) and np.isnan(lo)
    r, *_ = seed_correlation([1.0, 2.0], [1.0, 3.0], [0, 1], [0, 1])
    assert np.isnan(r)
    r, *_ = seed_correlation([1.0, 1.0, 1.0], [1.0, 3.0, 2.0], [0, 1, 2], [0, 1, 2])
    assert np.isnan(r)


def test_the_note_says_what_the_correlation_means_for_the_test() -> None:
    assert "pairing removes it" in correlation_note(0.6, 0.2, 0.85, 12, "paired")
    flat = correlation_note(0.1, -0.5, 0.6, 12, "paired")
    assert "11 df where an unpaired test has 22" in flat
    assert "conservative" in correlation_note(-0.7, -0.9, -0.2, 12, "paired")
    assert "leaves in its noise" in correlation_note(0.6, 0.2, 0.85, 12, "welch")
    assert correlation_note(float("nan"), float("nan"), float("nan"), 2, "paired") == ""
