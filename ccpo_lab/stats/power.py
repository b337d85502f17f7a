"""Statistical power of Welch's t-test, after Colas et al. 2018 ("How many random seeds?").

With per-arm sds ``s1, s2``, a true difference ``eps``, ``n`` seeds per arm and
level ``alpha``::

    nu    = (s1^2 + s2^2)^2 (n - 1) / (s1^4 + s2^4)      # Welch-Satterthwaite df
    t_eps = eps / sqrt((s1^2 + s2^2) / n)
    beta  = t.cdf(t.ppf(1 - alpha, nu) - t_eps, nu)       # P(type-II error)

This is the one-sided test of Colas et al. (``two_sided=False``, the default, to
reproduce their numbers). ``two_sided=True`` uses ``t.ppf(1 - alpha/2, nu)``,
the usual approximation for a two-sided test (the far tail is ignored); use it
when the verdict uses two-sided p-values, as :func:`ccpo_lab.stats.compare_arms`
does. The sds are *across seeds* of one arm (ddof=1); with one seed per arm
there is no such sd and the caller must supply an assumption (state it).

The paired test (``paired_*``) has the same form with the sd of the per-seed
differences ``sd_d`` over ``n`` pairs: ``nu = n - 1``, ``t_eps = eps / (sd_d / sqrt(n))``.
A comparison's power must come from the test that decides it: a paired comparison's
seeds-needed figure from ``sd_d`` (pairing removes the seed effect shared by both arms,
so ``sd_d`` is usually far below either arm's sd), a Welch one from the two arms' sds.
With the observed difference as ``eps`` and the test's own level, a comparison that the
test does not resolve at ``n`` seeds always needs more than ``n`` (its power there is at
most one half), so a table never says "unresolved" next to "n seeds needed".

nan rules shared by every function here: an sd that is nan or negative, both
sds zero, or ``n < 2`` make the result undefined (nan, or None for counts).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from ccpo_lab.stats.checks import check_unit

__all__ = [
    "minimal_detectable_difference",
    "paired_minimal_detectable_difference",
    "paired_seeds_needed",
    "paired_type2_error",
    "seeds_needed",
    "welch_type2_error",
]


def _check_level(alpha: float, power: float | None = None) -> None:
    check_unit(alpha, "alpha")
    if power is not None:
        check_unit(power, "power")


def _sds_ok(s1: float, s2: float) -> bool:
    return bool(
        np.isfinite(s1) and np.isfinite(s2) and s1 >= 0.0 and s2 >= 0.0 and (s1 > 0.0 or s2 > 0.0)
    )


def welch_type2_error(
    eps: ArrayLike,
    s1: float,
    s2: float,
    n: ArrayLike,
    alpha: float = 0.05,
    two_sided: bool = False,
) -> NDArray[np.float64] | float:
    """Type-II error ``beta`` of Welch's test at ``n`` seeds per arm (Colas et al. 2018).

    Args:
        eps: true difference(s) to detect, in the units of the sds; its sign is ignored
            (the test looks in the direction of the difference). Any shape.
        s1, s2: sd across seeds of each arm (ddof=1).
        n: seeds per arm (equal for both arms); any shape broadcast with ``eps``.
        alpha: level of the test, in (0, 1).
        two_sided: use ``alpha / 2`` per tail (see the module doc).

    Returns:
        beta in [0, 1]: a float for scalar inputs, else an array of the broadcast
        shape. nan where ``n < 2`` or the sds are unusable (see the module doc).
        ``1 - beta`` is the power.
    """
    _check_level(alpha)
    e = np.abs(np.asarray(eps, dtype=np.float64))
    nn = np.asarray(n, dtype=np.float64)
    e, nn = np.broadcast_arrays(e, nn)
    if not _sds_ok(s1, s2):
        out = np.full(e.shape, np.nan)
        return float(out) if out.ndim == 0 else out
    v1, v2 = float(s1) ** 2, float(s2) ** 2
    valid = nn >= 2
    n_safe = np.where(valid, nn, 2.0)
    nu = (v1 + v2) ** 2 * (n_safe - 1.0) / (v1 * v1 + v2 * v2)
    t_eps = e / np.sqrt((v1 + v2) / n_safe)
    tail = alpha / 2.0 if two_sided else alpha
    beta = special.stdtr(nu, special.stdtrit(nu, 1.0 - tail) - t_eps)  # t.cdf(t.ppf)
    out = np.where(valid & ~np.isnan(e), beta, np.nan)
    return float(out) if out.ndim == 0 else out


def seeds_needed(
    eps: float,
    s1: float,
    s2: float,
    alpha: float = 0.05,
    power: float = 0.8,
    n_max: int = 1000,
    two_sided: bool = False,
) -> int | None:
    """Smallest seeds-per-arm ``n >= 2`` with ``beta < 1 - power`` (Colas et al. 2018).

    Args:
        eps: the difference to detect (sign ignored), e.g. an observed diff or the
            smallest effect of interest, in the units of the sds.
        s1, s2: sd across seeds of each arm (ddof=1).
        alpha: level of the test.
        power: target power (0.8 means beta < 0.2).
        n_max: largest n searched.
        two_sided: see the module doc.

    Returns:
        The seed count per arm, or None when ``eps`` is 0 or nan, the sds are
        unusable, or more than ``n_max`` seeds would be needed.
    """
    _check_level(alpha, power)
    if not np.isfinite(eps) or eps == 0.0 or not _sds_ok(s1, s2) or n_max < 2:
        return None
    ns = np.arange(2, int(n_max) + 1)
    beta = np.asarray(welch_type2_error(eps, s1, s2, ns, alpha, two_sided))
    hit = np.flatnonzero(beta < 1.0 - power)
    return int(ns[hit[0]]) if hit.size else None


def minimal_detectable_difference(
    s1: float,
    s2: float,
    n: int,
    alpha: float = 0.05,
    power: float = 0.8,
    two_sided: bool = False,
) -> float:
    """Smallest difference that ``n`` seeds per arm detect with the given power.

    Solving ``beta(eps) = 1 - power`` in the formula of the module doc gives the
    closed form ``eps* = (t.ppf(1 - alpha', nu) + t.ppf(power, nu)) *
    sqrt((s1^2 + s2^2) / n)`` (``alpha' = alpha`` or ``alpha/2``); every
    ``eps > eps*`` has ``beta < 1 - power``.

    Args:
        s1, s2: sd across seeds of each arm (ddof=1).
        n: seeds per arm.
        alpha: level of the test.
        power: target power.
        two_sided: see the module doc.

    Returns:
        ``eps*`` in the units of the sds (>= 0 for power >= 1 - alpha'); nan if
        ``n < 2`` or the sds are unusable.
    """
    _check_level(alpha, power)
    if int(n) < 2 or not _sds_ok(s1, s2):
        return float("nan")
    n = int(n)
    v1, v2 = float(s1) ** 2, float(s2) ** 2
    nu = (v1 + v2) ** 2 * (n - 1.0) / (v1 * v1 + v2 * v2)
    tail = alpha / 2.0 if two_sided else alpha
    t_needed = special.stdtrit(nu, 1.0 - tail) + special.stdtrit(nu, power)
    return float(t_needed * np.sqrt((v1 + v2) / n))


def _sd_ok(sd: float) -> bool:
    return bool(np.isfinite(sd) and sd > 0.0)


def paired_type2_error(
    eps: ArrayLike,
    sd_diff: float,
    n: ArrayLike,
    alpha: float = 0.05,
    two_sided: bool = False,
) -> NDArray[np.float64] | float:
    """Type-II error ``beta`` of the paired t-test at ``n`` pairs (seeds in both arms).

    ``beta = t.cdf(t.ppf(1 - alpha', n - 1) - eps / (sd_diff / sqrt(n)), n - 1)``, the
    approximation of :func:`welch_type2_error` with the paired test's df and se.

    Args:
        eps: true mean difference(s) to detect (sign ignored); any shape.
        sd_diff: sd (ddof=1) of the per-seed differences X - Y over the common seeds.
        n: pairs; any shape broadcast with ``eps``.
        alpha: level of the test, in (0, 1).
        two_sided: use ``alpha / 2`` per tail.

    Returns:
        beta in [0, 1] (float for scalar inputs, else an array); nan where ``n < 2`` or
        ``sd_diff`` is not a positive number.
    """
    _check_level(alpha)
    e = np.abs(np.asarray(eps, dtype=np.float64))
    nn = np.asarray(n, dtype=np.float64)
    e, nn = np.broadcast_arrays(e, nn)
    if not _sd_ok(sd_diff):
        out = np.full(e.shape, np.nan)
        return float(out) if out.ndim == 0 else out
    valid = nn >= 2
    n_safe = np.where(valid, nn, 2.0)
    nu = n_safe - 1.0
    t_eps = e / (float(sd_diff) / np.sqrt(n_safe))
    tail = alpha / 2.0 if two_sided else alpha
    beta = special.stdtr(nu, special.stdtrit(nu, 1.0 - tail) - t_eps)
    out = np.where(valid & ~np.isnan(e), beta, np.nan)
    return float(out) if out.ndim == 0 else out


def paired_seeds_needed(
    eps: float,
    sd_diff: float,
    alpha: float = 0.05,
    power: float = 0.8,
    n_max: int = 1000,
    two_sided: bool = False,
) -> int | None:
    """Smallest number of pairs ``n >= 2`` with paired-test ``beta < 1 - power``.

    Args:
        eps: the difference to detect (sign ignored).
        sd_diff: sd (ddof=1) of the per-seed differences.
        alpha, power, n_max, two_sided: as :func:`seeds_needed`.

    Returns:
        Seeds per arm (each seed run in both arms), or None when ``eps`` is 0 or nan,
        ``sd_diff`` is not positive, or more than ``n_max`` would be needed.
    """
    _check_level(alpha, power)
    if not np.isfinite(eps) or eps == 0.0 or not _sd_ok(sd_diff) or n_max < 2:
        return None
    ns = np.arange(2, int(n_max) + 1)
    beta = np.asarray(paired_type2_error(eps, sd_diff, ns, alpha, two_sided))
    hit = np.flatnonzero(beta < 1.0 - power)
    return int(ns[hit[0]]) if hit.size else None


def paired_minimal_detectable_difference(
    sd_diff: float,
    n: int,
    alpha: float = 0.05,
    power: float = 0.8,
    two_sided: bool = False,
) -> float:
    """Smallest difference ``n`` pairs detect with the given power (paired t-test).

    ``eps* = (t.ppf(1 - alpha', n - 1) + t.ppf(power, n - 1)) * sd_diff / sqrt(n)``.

    Returns:
        ``eps*`` in the units of ``sd_diff``; nan if ``n < 2`` or ``sd_diff`` is not
        positive.
    """
    _check_level(alpha, power)
    if int(n) < 2 or not _sd_ok(sd_diff):
        return float("nan")
    n = int(n)
    tail = alpha / 2.0 if two_sided else alpha
    t_needed = special.stdtrit(n - 1.0, 1.0 - tail) + special.stdtrit(n - 1.0, power)
    return float(t_needed * float(sd_diff) / np.sqrt(n))
