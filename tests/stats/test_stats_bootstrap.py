"""Vectorised percentile bootstrap: reproducibility, chunking, stratification, coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from ccpo_lab.stats import (
    aggregate_iqm,
    bootstrap_ci,
    bootstrap_distribution,
    percentile_interval,
    stratified_bootstrap_ci,
    stratified_bootstrap_distribution,
)
from ccpo_lab.stats.bootstrap import stratified_resample

X = np.array([0.81, 0.86, 0.90, 0.78, 0.84])


def test_same_generator_state_same_interval() -> None:
    a = bootstrap_ci(X, np.random.default_rng(11), n_reps=5000)
    b = bootstrap_ci(X, np.random.default_rng(11), n_reps=5000)
    c = bootstrap_ci(X, np.random.default_rng(12), n_reps=5000)
    assert a == b
    assert (a.low, a.high) != (c.low, c.high)


def test_chunk_size_does_not_change_result() -> None:
    full = bootstrap_distribution(X, np.random.default_rng(5), n_reps=1001)
    tiny = bootstrap_distribution(X, np.random.default_rng(5), n_reps=1001, max_elements=7)
    np.testing.assert_array_equal(full, tiny)
    scores = np.random.default_rng(0).random((4, 3))
    s_full = stratified_bootstrap_distribution(scores, np.random.default_rng(5), "mean", 301)
    s_tiny = stratified_bootstrap_distribution(
        scores, np.random.default_rng(5), "mean", 301, max_elements=13
    )
    np.testing.assert_array_equal(s_full, s_tiny)


def test_bootstrap_mean_matches_explicit_loop() -> None:
    # the vectorised draw equals resampling row by row with the same index stream
    dist = bootstrap_distribution(X, np.random.default_rng(9), n_reps=50)
    idx = np.random.default_rng(9).integers(0, X.size, size=(50, X.size), dtype=np.intp)
    np.testing.assert_allclose(dist, [X[i].mean() for i in idx])


def test_interval_contains_estimate_and_is_within_range() -> None:
    iv = bootstrap_ci(X, np.random.default_rng(1), n_reps=20_000)
    assert iv.estimate == pytest.approx(X.mean())
    assert X.min() <= iv.low < iv.estimate < iv.high <= X.max()
    # close to the normal-theory width for a mean: se * sqrt((n-1)/n) (plug-in)
    se_plugin = X.std(ddof=0) / math.sqrt(X.size)
    assert iv.high - iv.low == pytest.approx(2 * 1.96 * se_plugin, rel=0.15)


def test_custom_statistic() -> None:
    iv = bootstrap_ci(X, np.random.default_rng(2), n_reps=2000,
                      statistic=lambda s: np.median(s, axis=-1))
    assert iv.estimate == np.median(X)
    assert iv.low <= iv.estimate <= iv.high


def test_bootstrap_degenerate() -> None:
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    one = bootstrap_ci([0.9, np.nan], rng)
    assert one.estimate == 0.9 and math.isnan(one.low) and one.n_reps == 0
    none = bootstrap_ci([np.nan], rng)
    assert math.isnan(none.estimate) and math.isnan(none.high)
    assert rng.bit_generator.state == state  # nothing drawn
    flat = bootstrap_ci([0.5, 0.5, 0.5], rng, n_reps=100)
    assert (flat.low, flat.high) == (0.5, 0.5)
    assert all(math.isnan(v) for v in percentile_interval([]))
    assert all(math.isnan(v) for v in percentile_interval([0.1, np.nan]))


def test_requires_generator() -> None:
    with pytest.raises(TypeError):
        bootstrap_ci(X, 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        stratified_bootstrap_ci(np.ones((2, 2)), np.random.RandomState(0))  # type: ignore[arg-type]


def test_stratified_resample_keeps_tasks() -> None:
    # column t of every resample only holds values of column t
    scores = np.array([[1.0, 10.0, 100.0], [2.0, 20.0, 200.0], [3.0, 30.0, 300.0]])
    idx = np.random.default_rng(4).integers(0, 3, size=(200, 3, 3), dtype=np.intp)
    res = stratified_resample(scores, idx)
    for t in range(3):
        assert set(np.unique(res[:, :, t])) <= set(scores[:, t])
    assert res[5, 1, 2] == scores[idx[5, 1, 2], 2]


def test_stratified_ci_iqm() -> None:
    scores = np.arange(80, dtype=float).reshape(5, 16)  # rliable's library_test fixture
    iv = stratified_bootstrap_ci(scores, np.random.default_rng(0), "iqm", n_reps=2000)
    assert iv.estimate == aggregate_iqm(scores) == sps.trim_mean(scores.ravel(), 0.25)
    assert iv.low < iv.estimate < iv.high
    for metric in ("mean", "median", "optimality_gap"):
        got = stratified_bootstrap_ci(scores / 80, np.random.default_rng(0), metric, n_reps=500)
        assert got.low <= got.estimate <= got.high


def test_stratified_degenerate() -> None:
    rng = np.random.default_rng(0)
    single = stratified_bootstrap_ci(np.array([[0.5, 0.7]]), rng)
    assert single.estimate == pytest.approx(0.6) and math.isnan(single.low)
    with_nan = stratified_bootstrap_ci(np.array([[0.5, np.nan], [0.4, 0.3]]), rng)
    assert math.isnan(with_nan.estimate) and math.isnan(with_nan.high)
    with pytest.raises(ValueError):
        stratified_bootstrap_ci(np.ones(3), rng)
    with pytest.raises(ValueError):
        stratified_bootstrap_ci(np.ones((2, 2)), rng, metric="nope")


def test_coverage_sanity() -> None:
    # 300 samples of n = 10 from N(0, 1); the 90% percentile interval of the mean should
    # cover 0 roughly 85-90% of the time (percentile bootstraps under-cover a bit at n = 10)
    rng = np.random.default_rng(2024)
    data = rng.standard_normal((300, 10))
    hits = 0
    for row in data:
        iv = bootstrap_ci(row, rng, confidence=0.9, n_reps=1000)
        hits += iv.low <= 0.0 <= iv.high
    assert 0.80 <= hits / 300 <= 0.95


def _simulated_coverage(n: int, confidence: float, trials: int, reps: int,
                        rng: np.random.Generator) -> float:
    """Coverage of the percentile interval of a mean of n N(0, 1) seeds (truth 0)."""
    hits = 0
    for chunk in np.array_split(np.arange(trials), max(1, trials * reps * n // 2_000_000)):
        x = rng.standard_normal((chunk.size, n))
        idx = rng.integers(0, n, size=(chunk.size, reps, n), dtype=np.int16)
        means = np.take_along_axis(x[:, None, :], idx, axis=2).mean(axis=2)
        lo, hi = np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2], axis=1)
        hits += int(((lo <= 0.0) & (hi >= 0.0)).sum())
    return hits / trials


def test_percentile_bootstrap_cannot_reach_95_at_three_seeds() -> None:
    from ccpo_lab.stats import percentile_coverage

    rng = np.random.default_rng(7)
    # an exact reason first: every percentile interval lies within the seeds' range ...
    x = rng.standard_normal(3)
    iv = bootstrap_ci(x, rng, 0.95, n_reps=20_000)
    assert x.min() <= iv.low and iv.high <= x.max()
    # ... and the range of 3 draws covers the centre of a symmetric distribution with
    # probability 1 - 2 * (1/2)^3 = 0.75 (all three on one side otherwise)
    r = rng.standard_normal((40_000, 3))
    assert abs(((r.min(axis=1) < 0) & (r.max(axis=1) > 0)).mean() - 0.75) < 0.01
    # simulated coverage of the "95%" interval: about 75% at 3 seeds, not 95%
    sim3 = _simulated_coverage(3, 0.95, 3000, 400, rng)
    assert abs(sim3 - 0.75) < 0.035 and abs(sim3 - percentile_coverage(3, 0.95)) < 0.035
    sim10 = _simulated_coverage(10, 0.95, 2000, 600, rng)
    assert abs(sim10 - percentile_coverage(10, 0.95)) < 0.03 and sim10 < 0.925


def test_bootstrap_min_runs_meets_the_level_within_bradleys_criterion() -> None:
    from ccpo_lab.stats import bootstrap_min_runs, percentile_coverage

    n = bootstrap_min_runs(0.95)
    assert n == 18 and bootstrap_min_runs(0.95, n_strata=6) == 8
    assert percentile_coverage(n - 1, 0.95) < 0.925 <= percentile_coverage(n, 0.95)
    assert bootstrap_min_runs(0.90) == 11 and bootstrap_min_runs(0.99) == 41
    rng = np.random.default_rng(8)
    sim = _simulated_coverage(n, 0.95, 2000, 600, rng)
    assert sim > 0.91 and abs(sim - percentile_coverage(n, 0.95)) < 0.025
    assert math.isnan(percentile_coverage(1, 0.95))


def test_stratified_coverage_pools_the_strata() -> None:
    # the stratified bootstrap of a mean over 6 tasks with 3 runs each: df 12, same shrink
    from ccpo_lab.stats import percentile_coverage

    rng = np.random.default_rng(9)
    tasks = np.linspace(0.2, 0.8, 6)
    hits, trials = 0, 600
    for _ in range(trials):
        scores = tasks + 0.1 * rng.standard_normal((3, 6))
        iv = stratified_bootstrap_ci(scores, rng, "mean", 0.95, n_reps=500)
        hits += iv.low <= tasks.mean() <= iv.high
    expected = percentile_coverage(3, 0.95, n_strata=6)
    assert abs(hits / trials - expected) < 0.045 and expected < 0.9
