"""Joint group-sequential boundaries for comparisons that share one reference arm.

Holm over ``r`` comparisons tests each at ``alpha / r`` as if they were unrelated. When
every comparison is an arm against the same reference, their statistics share the
reference's noise: with equal seeds and equal variances any two are correlated 0.5 (for
the paired t on seeds shared by all arms and for the two-sample t alike), so the chance
that *one of them* crosses a boundary is well below ``r`` times the chance of one. This
module calibrates the boundary of the **maximum** ``|t|`` over ``r`` comparisons, look by
look (Dunnett 1955 for one look; its group-sequential form is the max-statistic test of
Follmann, Proschan & Geller 1994 and Stallard & Todd 2003), and the step-down over the
family (the closed test of Marcus, Peritz & Gabriel 1976 with max-statistic intersection
tests, shortcut as in Romano & Wolf 2005) uses the ``r``-comparison boundary while ``r``
comparisons are not rejected.

**Calibration.** Under the null (every arm of the family has the reference's normal
law, any sd, any seed effect shared by the arms of a seed) the joint law of the ``t``
statistics across looks and comparisons does not depend on the sd or the seed effect.
:data:`JOINT_CALIBRATION_PATHS` simulated null studies (a fixed Generator seed: the same
levels on every machine) set each look's threshold on ``max_{i <= r} |t_i|`` so that
exactly the Lan-DeMets alpha spent at that look is crossed for the first time. A
threshold is returned as the per-comparison nominal p-level it corresponds to (the same
for every comparison: at a look every comparison has the same degrees of freedom), so
:func:`ccpo_lab.stats.sequential.step_down` applies it unchanged.

**Pooled variance (``variance: pooled``).** Comparison ``i``'s ``t`` divides its mean
difference by a standard error whose variance is pooled over the whole family (Dunnett's
choice), not estimated from its own two arms: ``paired``: the variance of the per-seed
differences averaged over the ``m`` comparisons (each over its own pairs; :func:`pooled`),
``t_i = mean(d_i) / sqrt(v / n_i)``; ``unpaired``: the within-arm variance pooled over the
``m + 1`` arms, ``t_i = (mean_i - mean_ref) / (s sqrt(1 / n_i + 1 / n_ref))``. At 12 seeds
and 4 comparisons the unpaired pool has 55 degrees of freedom instead of 22, the paired
one (correlated estimates) about 25 instead of 11: the power a per-comparison t loses to
its own noisy sd comes back. Its p-value, the form the levels take, uses :func:`joint_df`
(the pool's nominal df). An arm that stopped (its comparison closed) stays in the pool
with the seeds it has. Non-normal scores: the levels hold approximately
(``tests/adaptive/test_joint_error.py`` and ``benchmarks/bench_adastop.py`` measure
log-normal and bimodal scores).

**Ranks (``statistic: mean-or-rank``, the default of the unpaired test).** The mean's t
loses power on skewed scores: one large seed inflates both the mean difference and the
variance. Each comparison then also has the t of its ranks (:func:`rank_t`: the two
arms' scores ranked together, or the signed ranks of the per-seed differences; only the
comparison's own two arms enter, so a better arm elsewhere in the family does not move
the statistic of a null one), and its p-value is the weighted maximum test
:func:`max_test_p`, ``min(p_mean, RANK_WEIGHT * p_rank)``, with the direction of the
mean difference. The boundary is calibrated on that very p-value, look by look, as for
the mean's t (the levels are p-levels, no longer t's); the ranks' p is discrete at few
seeds, and a threshold that would fall inside a tie is set just below it, the alpha left
unspent carried to the next look. The calibration is exact for normal scores, like the
mean's; on others the error is measured, not guaranteed (``tests/adaptive``).

**Own variances (``variance: own``, the default).** The pooled variance assumes every
arm's seeds vary alike; when one arm's sd is 4 times the others', the family-wise error of
the pooled form reaches 0.10-0.13. With ``own`` each comparison is tested on its own
(:func:`own_p`: the paired t or Welch's; the ranks: the signed ranks' t, or Brunner and
Munzel's rank t, the ranks' Welch test), and the boundary is calibrated on null studies
whose comparisons are independent (each against its own reference draw): for the maximum
of two-sided statistics independence is the worst case of any correlation (Šidák 1967).
The paired t is exact whatever the arms' variances. Welch's p and the ranks' are not, at a
few seeds, and how far off they are depends on the ratio of the two arms' variances, so
the unpaired boundary is calibrated at several ratios
(:func:`ccpo_lab.stats.sequential.unequal_sds`: the reference's sd 1, 1/2, 1/4 and 1/100
of the arm's) and each look takes the most stringent threshold of theirs. Calibrated only
where the arms vary alike, it let 0.066 of null studies through (8,000) when the
reference's sd was a quarter of the others'. The price, where they do vary alike, is
power (``docs/adaptive-seeds.md``).

Shapes: ``K`` looks, ``m`` comparisons (``r = 1..m`` open ones).

References:
    Dunnett CW (1955). A multiple comparison procedure for comparing several treatments
    with a control. J Am Stat Assoc 50:1096-1121.
    Marcus R, Peritz E, Gabriel KR (1976). On closed testing procedures with special
    reference to ordered analysis of variance. Biometrika 63:655-660.
    Follmann DA, Proschan MA, Geller NL (1994). Monitoring pairwise comparisons in
    multi-armed clinical trials. Biometrics 50:325-336.
    Stallard N, Todd S (2003). Sequential designs for phase III clinical trials
    incorporating treatment selection. Stat Med 22:689-703.
    Romano JP, Wolf M (2005). Exact and approximate stepdown methods for multiple
    hypothesis testing. J Am Stat Assoc 100:94-108.
    Brunner E, Munzel U (2000). The nonparametric Behrens-Fisher problem: asymptotic
    theory and a small-sample approximation. Biometrical J 42:17-25.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy import special, stats

from ccpo_lab.stats.sequential import alpha_spent, crossing_threshold, unequal_sds

__all__ = ["JOINT_CALIBRATION_PATHS", "MAX_JOINT_COMPARISONS", "RANK_WEIGHT", "STATISTICS",
           "VARIANCES", "JointStatistic", "JointTest", "JointVariance", "default_statistic",
           "joint_df",
           "joint_levels", "max_test_p", "pooled", "rank_t"]

JointTest = Literal["paired", "unpaired"]
JointStatistic = Literal["mean", "mean-or-rank"]
STATISTICS: tuple[JointStatistic, ...] = ("mean", "mean-or-rank")
JointVariance = Literal["pooled", "own"]
VARIANCES: tuple[JointVariance, ...] = ("pooled", "own")



def default_statistic(test: str) -> JointStatistic:
    """The recommended statistic of a declared test: ``mean-or-rank`` for ``unpaired``,
    ``mean`` for ``paired`` (docs/adaptive-seeds.md measures both)."""
    return "mean-or-rank" if test == "unpaired" else "mean"


JOINT_CALIBRATION_PATHS = 400_000
"""Simulated null studies behind :func:`joint_levels`: each look's alpha is exact to about
``sqrt(alpha / JOINT_CALIBRATION_PATHS)`` (0.00035 at 0.05)."""
MAX_JOINT_COMPARISONS = 12
"""The most comparisons a joint boundary is calibrated for (a family of 13 arms)."""
_SEED = 19_550_501
_CHUNK = 25_000


def joint_df(n: int | NDArray[np.int64], test: JointTest, m: int) -> NDArray[np.float64]:
    """Nominal degrees of freedom of the pooled variance of ``m`` comparisons at ``n``
    seeds per arm: ``m (n - 1)`` (paired) or ``(m + 1) (n - 1)`` (unpaired)."""
    nn = np.asarray(n, dtype=np.float64)
    return (m if test == "paired" else m + 1.0) * (nn - 1.0)


def pooled(ss: NDArray[np.float64], dof: NDArray[np.float64]
           ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(sum ss / sum dof, sum dof)`` over the last axis: a pooled variance and its df.

    Args:
        ss: float (..., G), sums of squared deviations from each group's mean (paired:
            of each comparison's per-seed differences; unpaired: of each arm's scores).
        dof: float (..., G), each group's ``n - 1`` (0 for a group with < 2 values).
    """
    tot = np.sum(dof, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tot > 0, np.sum(ss, axis=-1) / tot, np.nan), tot


def rank_t(x: NDArray[np.float64], y: NDArray[np.float64], paired: bool,
           ties: bool = True, variance: JointVariance = "pooled"
           ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The t statistic of one comparison's ranks, and its degrees of freedom.

    ``unpaired``: the two arms' scores ranked together (midranks for ties), the
    two-sample t of the ranks with their variance pooled over the two arms (the
    rank-transform t of Conover & Iman 1981, the Wilcoxon-Mann-Whitney test in t form);
    ``paired``: the signed ranks of the per-seed differences (Wilcoxon's), their
    one-sample t. Only the comparison's own two arms enter, so under its null the
    statistic's law does not depend on any other arm (what the step-down needs).
    ``unpaired`` with ``variance: own``: Brunner & Munzel's (2000) rank t instead, each
    arm's rank variance estimated from its own placements, with Satterthwaite's degrees
    of freedom: the ranks' Welch test, made for arms that spread unequally (the pooled
    rank t then misjudges its own variance, as the pooled t does).

    Args:
        x: float (..., n_x), the arm's scores.
        y: float (..., n_y), the baseline's (paired: seed-aligned, ``n_y == n_x``); the
            leading shapes equal.
        ties: False where no two values can tie (continuous draws: a calibration), for
            plain ranks, 6 times faster than midranks.
        variance: ``pooled`` (the rank-transform t) or ``own`` (Brunner-Munzel's, unpaired).

    Returns:
        ``(t, df)``, float (...); ``t`` nan where the ranks have no spread (every score
        tied, or fewer than 2 values).
    """
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if paired:
        d = xa - ya
        n = d.shape[-1]
        r = np.sign(d) * _ranks(np.abs(d), ties)
        mean = r.mean(axis=-1)
        ss = np.sum((r - mean[..., None]) ** 2, axis=-1)
        df = float(n - 1)
        scale = 1.0 / n
    elif variance == "own":
        return _brunner_munzel_t(xa, ya, ties)
    else:
        nx, ny = xa.shape[-1], ya.shape[-1]
        r = _ranks(np.concatenate([xa, ya], axis=-1), ties)
        rx, ry = r[..., :nx], r[..., nx:]
        mean = rx.mean(axis=-1) - ry.mean(axis=-1)
        ss = (np.sum((rx - rx.mean(axis=-1, keepdims=True)) ** 2, axis=-1)
              + np.sum((ry - ry.mean(axis=-1, keepdims=True)) ** 2, axis=-1))
        df = float(nx + ny - 2)
        scale = 1.0 / nx + 1.0 / ny if nx and ny else np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(ss / df * scale) if df > 0 else np.full_like(ss, np.nan)
        t = np.where(se > 0, mean / se, np.nan)
    return t, np.full_like(t, df)


def _brunner_munzel_t(x: NDArray[np.float64], y: NDArray[np.float64], ties: bool
                      ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Brunner-Munzel's t of ``x`` against ``y`` (positive: ``x`` ranks higher) and its
    Satterthwaite df; nan where neither arm's placements vary (e.g. complete separation)
    or an arm has fewer than 2 values.

    With ``R`` the ranks among both arms and ``Q`` those within the arm, an arm's
    placements are ``R - Q``, ``S2`` their sample variance: ``t = (mean R_x - mean R_y)
    n_x n_y / ((n_x + n_y) sqrt(n_x S2_x + n_y S2_y))`` (Brunner & Munzel 2000), the
    same as ``scipy.stats.brunnermunzel`` with the sign of ``x - y``."""
    nx, ny = x.shape[-1], y.shape[-1]
    if nx < 2 or ny < 2:
        nan = np.full(np.broadcast_shapes(x.shape[:-1], y.shape[:-1]), np.nan)
        return nan, nan.copy()
    r = _ranks(np.concatenate([x, y], axis=-1), ties)
    px, py = r[..., :nx] - _ranks(x, ties), r[..., nx:] - _ranks(y, ties)
    sx, sy = px.var(axis=-1, ddof=1), py.var(axis=-1, ddof=1)
    a, b = nx * sx, ny * sy  # the placements' variance of each arm, times its size
    v = a + b
    with np.errstate(divide="ignore", invalid="ignore"):
        t = nx * ny * (r[..., :nx].mean(axis=-1) - r[..., nx:].mean(axis=-1)) / (
            (nx + ny) * np.sqrt(v))
        df = v * v / (a * a / (nx - 1) + b * b / (ny - 1))
        ok = v > 0
        return np.where(ok, t, np.nan), np.where(ok, df, np.nan)


def _ranks(z: NDArray[np.float64], ties: bool) -> NDArray[np.float64]:
    """Ranks along the last axis from 1: midranks, or plain ones (``ties`` False)."""
    if ties:
        return np.asarray(stats.rankdata(z, axis=-1), dtype=np.float64)
    return np.argsort(np.argsort(z, axis=-1), axis=-1).astype(np.float64) + 1.0


RANK_WEIGHT = 4.0
"""How much stronger the ranks' evidence must be to decide: ``mean-or-rank`` takes the
ranks' p times this. Chosen on simulated studies of the benchmark's kind (1,500 a case, 5
arms, looks 3/6/9/12, unpaired): against the mean's t alone the +1 sd arm's power changed
by -0.044 (weight 1), -0.024 (2), -0.007 (4) on normal scores, +0.087, +0.090, +0.076 on
log-normal ones, -0.014, +0.005, +0.004 on bimodal ones (Generator seed 31: its first
null studies are the benchmark's), then on other studies (seed 7) by -0.004 (4), -0.001
(8); +0.091, +0.071; +0.013, +0.007 (docs/adaptive-seeds.md)."""


def max_test_p(p_mean: NDArray[np.float64], diff: NDArray[np.float64],
               t_rank: NDArray[np.float64], df_rank: NDArray[np.float64]
               ) -> NDArray[np.float64]:
    """The two-sided p of ``mean-or-rank``: a weighted maximum test of the mean's t and
    the ranks'.

    ``min(p_mean, RANK_WEIGHT * p_rank)`` where the ranks (:func:`rank_t`) point the way
    the mean difference does, so a claim's direction is always the mean difference's;
    the mean's p elsewhere (ranks undefined or pointing the other way), nan where the
    mean's is. The boundary of :func:`joint_levels` is calibrated on this very p (the
    level is not the mean's p-level: it is lower), so taking the smaller of two costs
    no error.

    Args:
        p_mean: float (...), the mean's two-sided p (the pooled t's).
        diff: float (...), the mean difference, arm minus baseline.
        t_rank, df_rank: float (...), :func:`rank_t`'s.
    """
    p_m = np.asarray(p_mean, dtype=np.float64)
    t_r = np.asarray(t_rank, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        p_r = np.minimum(RANK_WEIGHT * 2.0 * special.stdtr(df_rank, -np.abs(t_r)), 1.0)
        same = (np.isfinite(p_r) & np.isfinite(p_m) & (np.sign(t_r) == np.sign(diff))
                & (np.asarray(diff) != 0))
    return np.where(same, np.minimum(p_m, p_r), p_m)


@lru_cache(maxsize=4)
def _null_paths(test: JointTest, ns: tuple[int, ...], m: int, width: int,
                statistic: JointStatistic = "mean", variance: JointVariance = "pooled",
                sd_ref: float = 1.0) -> NDArray[np.float32]:
    """float32 (P, K, m): the most extreme statistic of null studies over comparisons
    ``1..r`` at look ``k`` (column ``r - 1``), on their first ``ns[k]`` seeds: ``-max |t|``
    (``mean``) or the smallest :func:`max_test_p` (``mean-or-rank``); ``width`` seeds are
    drawn per arm whatever ``ns``, so a look's threshold does not depend on the looks
    planned after it; ``sd_ref``: the references' sd (``own``; the arms' is 1)."""
    rng = np.random.default_rng(_SEED)
    n = np.asarray(ns)
    out = np.empty((JOINT_CALIBRATION_PATHS, n.size, m), dtype=np.float32)
    for lo in range(0, JOINT_CALIBRATION_PATHS, _CHUNK):
        c = min(_CHUNK, JOINT_CALIBRATION_PATHS - lo)
        if variance == "own":  # independent comparisons: the worst case of any variances
            x = rng.standard_normal((c, 2 * m, width))
            e = _p_extremes(x[:, m:], sd_ref * x[:, :m], n, test, statistic, "own",
                            ties=False)
        else:
            e = _extremes(rng.standard_normal((c, m + 1, width)), n, test, statistic,
                          ties=False)
        out[lo:lo + c] = np.minimum.accumulate(e, axis=1).transpose(0, 2, 1)
    return out


def _extremes(x: NDArray[np.float64], n: NDArray[np.int64], test: JointTest,
              statistic: JointStatistic, variance: JointVariance = "pooled",
              ties: bool = True) -> NDArray[np.float64]:
    """float (c, m, K): how extreme each comparison of arms 1..m against arm 0 is on the
    first ``n[k]`` seeds, smaller more extreme: ``-|t|`` of the pooled t (``mean``,
    ``pooled``) or a p-value: the comparison's own test's (``own``: :func:`own_p`), or
    :func:`max_test_p` of it and the ranks' (``mean-or-rank``)."""
    if variance == "pooled" and statistic == "mean":
        return -np.abs(_t_prefix(x, n, test))
    base = np.broadcast_to(x[:, :1], x[:, 1:].shape)
    return _p_extremes(x[:, 1:], base, n, test, statistic, variance,
                       _t_prefix(x, n, test) if variance == "pooled" else None, ties)


def _p_extremes(x_arm: NDArray[np.float64], x_base: NDArray[np.float64],
                n: NDArray[np.int64], test: JointTest, statistic: JointStatistic,
                variance: JointVariance, t_pooled: NDArray[np.float64] | None = None,
                ties: bool = True) -> NDArray[np.float64]:
    """float (c, m, K): each comparison's p-value on its first ``n[k]`` seeds: the pooled
    ``t_pooled``'s (c, m, K) or its own test's (:func:`own_p`), with the ranks' maximum
    test for ``mean-or-rank``. ``x_arm``, ``x_base``: float (c, m, >= n[-1])."""
    m = x_arm.shape[1]
    p = np.empty((x_arm.shape[0], m, n.size))
    for k, nk in enumerate(n):
        a, b = x_arm[..., :nk], x_base[..., :nk]
        if variance == "own" or t_pooled is None:
            p_mean = own_p(a, b, test == "paired")
        else:
            with np.errstate(invalid="ignore"):
                p_mean = 2.0 * special.stdtr(float(joint_df(nk, test, m)),
                                             -np.abs(t_pooled[:, :, k]))
        if statistic == "mean":
            p[:, :, k] = p_mean
            continue
        t_r, df_r = rank_t(a, b, test == "paired", ties, variance)
        p[:, :, k] = max_test_p(p_mean, (a - b).mean(axis=-1), t_r, df_r)
    return p


def own_p(x: NDArray[np.float64], y: NDArray[np.float64], paired: bool
          ) -> NDArray[np.float64]:
    """Two-sided p of each comparison's own test (``variance:
    own``): the paired t of its per-seed differences, or Welch's t; nan without spread.
    What :func:`ccpo_lab.stats.compare_arms` computes, batched.

    Args:
        x, y: float (..., n_x) and (..., n_y), the arm's and the baseline's scores
            (paired: by seed, ``n_x == n_y``).
    """
    n, n_y = x.shape[-1], y.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        if paired:
            d = x - y
            v = d.var(axis=-1, ddof=1)
            t = d.mean(axis=-1) / np.sqrt(v / n)
            df = np.full_like(v, n - 1.0)
        else:
            a, b = x.var(axis=-1, ddof=1) / n, y.var(axis=-1, ddof=1) / n_y
            t = (x.mean(axis=-1) - y.mean(axis=-1)) / np.sqrt(a + b)
            df = (a + b) ** 2 / (a * a / (n - 1) + b * b / (n_y - 1))
        return np.where(np.isfinite(t), 2.0 * special.stdtr(df, -np.abs(t)), np.nan)


def _t_prefix(x: NDArray[np.float64], n: NDArray[np.int64], test: JointTest
              ) -> NDArray[np.float64]:
    """Pooled t of arms 1..m against arm 0 on the first ``n[k]`` seeds: (c, m, K)."""
    def moments(z: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        s1 = np.cumsum(z, axis=-1)[..., n - 1]
        s2 = np.cumsum(z * z, axis=-1)[..., n - 1]
        mean = s1 / n
        return mean, np.maximum((s2 - n * mean * mean) / (n - 1.0), 0.0)

    with np.errstate(divide="ignore", invalid="ignore"):
        if test == "paired":
            mean, var = moments(x[:, 1:, :] - x[:, :1, :])
            return mean / np.sqrt(var.mean(axis=1, keepdims=True) / n)
        mean, var = moments(x)
        return (mean[:, 1:] - mean[:, :1]) / np.sqrt(2.0 * var.mean(axis=1, keepdims=True)
                                                     / n)


def joint_levels(
    looks: Sequence[int],
    max_seeds: int,
    alpha: float,
    m: int,
    spending: str = "obrien-fleming",
    test: JointTest = "paired",
    statistic: JointStatistic = "mean",
    variance: JointVariance = "pooled",
) -> NDArray[np.float64]:
    """Per-comparison nominal levels of the max-statistic boundary, per look and family size.

    Look ``k`` rejects comparison ``i`` of a family of ``r`` open comparisons when its
    two-sided p-value is <= ``[k, r - 1]``: its pooled ``t``'s with :func:`joint_df`
    degrees of freedom (``mean``), or :func:`max_test_p` of that and its ranks' t
    (``mean-or-rank``). Under the null of the ``r``, the first crossing by any of them
    happens at look ``k`` with probability equal to the alpha spent there (at most: a
    tie of discrete rank p-values at the threshold is left uncrossed), and all looks
    together spend ``alpha`` (the last look spends it in full).

    Args:
        looks: seeds per arm at each look, strictly increasing, >= 2; the last is final.
        max_seeds: the design's maximum (information fractions are ``n / max_seeds``).
        alpha: the family-wise level, in (0, 1).
        m: comparisons, 1..:data:`MAX_JOINT_COMPARISONS`.
        spending: a key of :data:`ccpo_lab.stats.sequential.SPENDING_FUNCTIONS`.
        test: ``paired`` or ``unpaired``.
        statistic: one of :data:`STATISTICS`.
        variance: ``pooled`` (the family's, :func:`joint_df` degrees of freedom) or
            ``own`` (each comparison's own test, :func:`own_p`; the levels are then
            p-levels of that test).

    Returns:
        float (K, m); 0 where a look spends nothing new.

    Raises:
        ValueError: looks not strictly increasing from 2, ``m`` out of range, bad test or
            statistic.
    """
    ns = tuple(int(n) for n in looks)
    if not ns or ns[0] < 2 or any(b <= a for a, b in zip(ns, ns[1:], strict=False)):
        raise ValueError(f"looks must be strictly increasing seed counts >= 2, got {ns}")
    if not 1 <= int(m) <= MAX_JOINT_COMPARISONS:
        raise ValueError(f"m must be in 1..{MAX_JOINT_COMPARISONS}, got {m!r}")
    if test not in ("paired", "unpaired"):
        raise ValueError(f"test must be 'paired' or 'unpaired', got {test!r}")
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {STATISTICS}, got {statistic!r}")
    if variance not in VARIANCES:
        raise ValueError(f"variance must be one of {VARIANCES}, got {variance!r}")
    return np.array(_levels(ns, int(max_seeds), float(alpha), int(m), spending, test,
                            statistic, variance))


@lru_cache(maxsize=256)
def _levels(ns: tuple[int, ...], max_seeds: int, alpha: float, m: int, spending: str,
            test: JointTest, statistic: JointStatistic = "mean",
            variance: JointVariance = "pooled") -> tuple[tuple[float, ...], ...]:
    width = max(max_seeds, ns[-1])
    # own, unpaired: the least favourable of several ratios of the arms' variances
    sds = [sy for _, sy in unequal_sds(True)] if (variance, test) == ("own", "unpaired") \
        else [1.0]
    paths = [_null_paths(test, ns, m, width, statistic, variance, sd) for sd in sds]
    t_form = statistic == "mean" and variance == "pooled"  # else the paths are p-values
    spent = alpha_spent(np.asarray(ns, dtype=np.float64) / max_seeds, alpha, spending)
    spent[-1] = alpha
    df = joint_df(np.asarray(ns), test, m)
    n_paths = paths[0].shape[0]
    out = np.zeros((len(ns), m))
    for r in range(1, m + 1):
        evs = [p[:, :, r - 1] for p in paths]
        alive = [np.ones(n_paths, dtype=bool) for _ in paths]
        prev = 0.0
        for k in range(len(ns)):
            if t_form:
                inc = [max(float(spent[k]) - prev, 0.0)]
                prev = max(prev, float(spent[k]))
            else:  # a tied rank p may cross less than is spent: the next look spends it
                inc = [max(float(spent[k]) - (1.0 - float(np.count_nonzero(al)) / n_paths),
                           0.0) for al in alive]
            thr = min(crossing_threshold(ev[al, k], int(round(i * n_paths)), not t_form)
                      for ev, al, i in zip(evs, alive, inc, strict=True))
            if t_form:
                out[k, r - 1] = min(float(2.0 * special.stdtr(df[k], thr)), 1.0)
            else:
                out[k, r - 1] = min(max(thr, 0.0), 1.0)
            for ev, al in zip(evs, alive, strict=True):
                al &= ev[:, k] > thr
    return tuple(tuple(float(v) for v in row) for row in out)
