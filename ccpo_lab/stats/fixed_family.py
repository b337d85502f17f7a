"""The fixed-seed family: the adaptive design's default rule with a single look.

A study without an adaptive design tests each comparison once, on all its seeds. It
uses the rule :class:`~ccpo_lab.config.design.AdaptiveDesign` recommends (``family:
joint``, ``variance: own``, the declared test's default ``statistic``) with one look, so
a fixed-seed report and a one-look design give the same verdicts on the same data, but
where an adjusted p lies within the two calibrations' Monte-Carlo error of alpha (about
0.0005 at 0.05; ``tests/stats/test_fixed_family.py`` checks it study by study):

* **Each comparison's own test.** The paired t on the seeds both arms ran, else Welch's t
  (:func:`ccpo_lab.stats.compare_arms`). An unpaired comparison also has Brunner and
  Munzel's rank t (``statistic: mean-or-rank``, the unpaired default): its p is
  :func:`ccpo_lab.stats.joint.max_test_p` of the two, *calibrated* (:func:`calibrated_p`):
  the largest chance, over the least favourable ratios of the two arms' variances
  (:func:`ccpo_lab.stats.sequential.unequal_sds`), that a null comparison at the same seed
  counts (normal scores, :data:`CALIBRATION_DRAWS` draws of a fixed Generator per ratio)
  gives a p at most as small. A paired comparison's p is the paired t's (``statistic:
  mean``, exact for normal differences).
* **The family.** Comparisons that share one baseline: Holm's step-down at Šidák's levels
  (:func:`holm_sidak`). With one look this *is* the own variance's joint boundary: that
  boundary is calibrated on independent comparisons (the worst case of any correlation
  for two-sided tests, Šidák 1967), where the smallest of ``r`` calibrated p-values is
  at most ``1 - (1 - alpha)^(1/r)`` with probability alpha. Comparisons against
  different baselines: Holm (:func:`ccpo_lab.stats.holm`), as the design.

References:
    Holm S (1979). A simple sequentially rejective multiple test procedure. Scand J Stat
    6:65-70.
    Šidák Z (1967). Rectangular confidence regions for the means of multivariate normal
    distributions. J Am Stat Assoc 62:626-633.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ccpo_lab.stats.compare import Comparison, holm

__all__ = ["CALIBRATION_DRAWS", "calibrated_p", "comparison_p", "fixed_family", "holm_sidak"]

CALIBRATION_DRAWS = 200_000
"""Null comparisons behind :func:`calibrated_p`: a calibrated p is exact to about
``sqrt(p / CALIBRATION_DRAWS)`` (0.0005 at 0.05)."""
_SEED = 19_790_601
_CHUNK_VALUES = 5_000_000
"""Scores drawn at once by a calibration (40 MB): many seeds take more chunks, not more
memory."""


def holm_sidak(p_values: ArrayLike) -> NDArray[np.float64]:
    """Holm's step-down at Šidák's levels: adjusted p-values.

    With the ``m`` non-nan p-values sorted ascending, the ``j``-th adjusted value is
    ``max_{i <= j} 1 - (1 - p_(i))^(m - i + 1)``; a comparison is rejected at alpha where
    its adjusted value is <= alpha. nan stays nan and is not counted in ``m`` (as
    :func:`ccpo_lab.stats.holm`).

    Args:
        p_values: float (m,), in [0, 1] or nan.

    Returns:
        float (m,).
    """
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if ok.size == 0:
        return out
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise ValueError(f"p-values must be in [0, 1], got {p[ok].tolist()}")
    order = ok[np.argsort(p[ok], kind="stable")]
    steps = np.arange(ok.size, 0, -1, dtype=np.float64)
    with np.errstate(divide="ignore"):  # p = 1: log1p(-1) = -inf, adjusted 1
        adj = -np.expm1(steps * np.log1p(-p[order]))  # 1 - (1 - p)^steps, exact small p
    out[order] = np.minimum(np.maximum.accumulate(adj), 1.0)
    return out


@lru_cache(maxsize=64)
def _null_max_test(n_x: int, n_y: int, sd_x: float = 1.0, sd_y: float = 1.0
                   ) -> NDArray[np.float64]:
    """float (D,), sorted: :func:`max_test_p` of null unpaired comparisons of normal scores
    (mean 0, sd ``sd_x`` and ``sd_y``) at ``n_x`` and ``n_y`` seeds (D =
    :data:`CALIBRATION_DRAWS`, nan last)."""
    from ccpo_lab.stats.joint import max_test_p, own_p, rank_t  # scipy.stats: when needed

    rng = np.random.default_rng((_SEED, n_x, n_y))
    out = np.empty(CALIBRATION_DRAWS)
    chunk = max(1_000, min(50_000, _CHUNK_VALUES // (n_x + n_y)))  # bounded memory
    for lo in range(0, CALIBRATION_DRAWS, chunk):
        c = min(chunk, CALIBRATION_DRAWS - lo)
        x, y = sd_x * rng.standard_normal((c, n_x)), sd_y * rng.standard_normal((c, n_y))
        t_r, df_r = rank_t(x, y, paired=False, ties=False, variance="own")
        out[lo:lo + c] = max_test_p(own_p(x, y, paired=False), x.mean(axis=-1) - y.mean(axis=-1),
                                    t_r, df_r)
    return np.sort(out)


def calibrated_p(p: float, n_x: int, n_y: int) -> float:
    """The largest chance, over the least favourable variances
    (:func:`ccpo_lab.stats.sequential.unequal_sds`), that a null unpaired comparison at
    ``n_x`` and ``n_y`` seeds (normal scores) has a :func:`max_test_p` at most ``p``:
    the p-value of the maximum test.

    A tie of discrete rank p-values at ``p`` counts in full (a rejection never takes
    part of a tie, as the design's boundary)."""
    if not np.isfinite(p) or n_x < 2 or n_y < 2:
        return float("nan")
    from ccpo_lab.stats.sequential import unequal_sds

    out = 0.0
    for sd_x, sd_y in unequal_sds(n_x == n_y):
        null = _null_max_test(int(n_x), int(n_y), sd_x, sd_y)
        out = max(out, float(np.searchsorted(null, p, side="right")) / null.size)
    return out


def comparison_p(c: Comparison, x: ArrayLike, y: ArrayLike) -> float:
    """The p of comparison ``c`` under the fixed-seed rule: the paired t's, or the
    calibrated maximum test of Welch's t and the ranks' t.

    Args:
        c: the comparison (:func:`ccpo_lab.stats.compare_arms`) of ``x`` with ``y``.
        x, y: float (n,), the two arms' per-seed values (nan: missing seeds).
    """
    if c.test == "paired" or not np.isfinite(c.p_value):
        return float(c.p_value)
    from ccpo_lab.stats.joint import max_test_p, rank_t  # scipy.stats: only when needed

    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    xa, ya = xa[np.isfinite(xa)], ya[np.isfinite(ya)]
    t_r, df_r = rank_t(xa, ya, paired=False, variance="own")
    p = max_test_p(np.asarray(c.p_value), np.asarray(c.diff), t_r, df_r)
    return calibrated_p(float(p), xa.size, ya.size)


def fixed_family(cmps: Sequence[Comparison], values: Mapping[str, ArrayLike],
                 pairs: Sequence[tuple[str, str]]
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Each comparison's p and its adjusted p under the fixed-seed rule.

    Every pair with the same baseline: :func:`comparison_p` (the ranks enter unpaired
    comparisons) and :func:`holm_sidak`; different baselines: each test's own p (the
    mean's) and Holm, as the design's Holm family.

    Args:
        cmps: (m,) :class:`Comparison` of each pair's arm with its baseline.
        values: arm name -> float (n_seeds,) per-seed values.
        pairs: (m,) ``(arm, baseline)``.

    Returns:
        ``(p, p_adjusted)``, float (m,) each; nan where a comparison was untestable.
    """
    if len({b for _, b in pairs}) > 1:
        p = np.array([c.p_value for c in cmps], dtype=np.float64)
        return p, holm(p)
    p = np.array([comparison_p(c, values[a], values[b]) for c, (a, b) in
                  zip(cmps, pairs, strict=True)], dtype=np.float64)
    return p, holm_sidak(p)
