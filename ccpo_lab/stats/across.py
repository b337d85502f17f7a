"""Does an arm's advantage over the reference differ between environments?

The arm x environment interaction of one comparison: with ``E`` environments, ``D_e`` is
the arm's mean difference to the reference on environment ``e``; the null hypothesis is
``D_1 = ... = D_E``. Two forms, chosen by the data's design, never by its values:

* **paired** (:func:`paired_interaction`): every environment ran the same seeds for both
  arms, so seed ``s`` gives a difference ``d[s, e]`` per environment. Two environments:
  the paired t on ``d[:, 0] - d[:, 1]`` (its interval is the interaction's); more:
  Hotelling's T^2 on the environments' successive contrasts (``n >= E`` seeds; exact
  under normal per-seed differences whatever their covariance between environments),
  else the repeated-measures F with its conservative lower-bound degrees of freedom.
* **independent** (:func:`independent_interaction`): an environment's seeds are not the
  others' (or an arm lacks one): each ``D_e`` with its squared standard error ``V_e`` and
  degrees of freedom ``f_e``. Two environments: Welch's t on ``D_1 - D_2`` with
  Satterthwaite's degrees of freedom; more: Welch's (1951) heterogeneity F on the
  ``D_e`` with weights ``1 / V_e``.

A p-value below the family's level says the advantage differs between environments;
above it, the data do not tell (*not* that it is the same: the interval says how large a
difference is still possible).

Shapes: ``n`` seeds, ``E`` environments.

References:
    Welch BL (1951). On the comparison of several mean values: an alternative approach.
    Biometrika 38:330-336.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

__all__ = ["Interaction", "environment_difference", "independent_interaction",
           "paired_interaction"]


@dataclass(frozen=True)
class Interaction:
    """The interaction test of one comparison across ``E`` environments."""

    test: str
    """``paired t``, ``Hotelling T2``, ``repeated-measures F (lower bound)``, ``Welch t``
    or ``Welch F``."""
    estimate: float | None
    """Two environments: ``D_1 - D_2`` (the first minus the second); more: None."""
    ci: tuple[float, float] | None
    """Its interval at the confidence asked (two environments; None otherwise)."""
    statistic: float
    """t (two environments) or F."""
    df: tuple[float, ...]
    """Degrees of freedom: ``(df,)`` for t, ``(df1, df2)`` for F."""
    p: float
    """Two-sided p-value of ``D_1 = ... = D_E``."""
    n_seeds: int
    """Seeds behind it (paired: the shared seeds; independent: the fewest of any
    environment's comparison)."""


def environment_difference(x: ArrayLike, y: ArrayLike, paired: bool
                           ) -> tuple[float, float, float]:
    """``(D, V, f)`` of one environment: the mean difference ``x - y``, its squared
    standard error and degrees of freedom. ``x``, ``y``: float (n,) per-seed scores of the
    arm and the reference (paired: seed ``i`` of both); two seeds at least each."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if paired:
        d = a - b
        return float(d.mean()), float(d.var(ddof=1) / d.size), float(d.size - 1)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    v = va + vb
    f = v**2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1)) if v > 0 else \
        float(a.size + b.size - 2)
    return float(a.mean() - b.mean()), float(v), float(f)


def paired_interaction(d: ArrayLike, confidence: float = 0.95) -> Interaction:
    """The interaction from per-seed differences. ``d``: float (n, E), ``d[s, e]`` the
    arm minus the reference at seed ``s`` on environment ``e`` (n >= 2, E >= 2)."""
    m = np.asarray(d, dtype=float)
    n, e = m.shape
    if n < 2 or e < 2:
        raise ValueError(f"need 2+ seeds and 2+ environments, got {m.shape}")
    if e == 2:
        c = m[:, 0] - m[:, 1]
        est, se, df = float(c.mean()), float(c.std(ddof=1) / np.sqrt(n)), float(n - 1)
        return _t("paired t", est, se, df, confidence, n)
    if n >= e:
        return _hotelling(m)
    return _rm_lower_bound(m)


def _hotelling(m: np.ndarray) -> Interaction:
    """Hotelling's T^2 on the ``E - 1`` successive contrasts of ``m`` (float (n, E),
    n >= E): exact under normal differences with any covariance between environments."""
    n, e = m.shape
    c = m[:, :-1] - m[:, 1:]
    mean, cov = c.mean(axis=0), np.atleast_2d(np.cov(c, rowvar=False))
    try:
        t2 = float(n * mean @ np.linalg.solve(cov, mean))
    except np.linalg.LinAlgError:
        return _rm_lower_bound(m)
    df1, df2 = float(e - 1), float(n - e + 1)
    f = t2 * df2 / ((n - 1) * df1)
    return Interaction("Hotelling T2", None, None, f, (df1, df2), float(sps.f.sf(f, df1, df2)),
                       n)


def _rm_lower_bound(m: np.ndarray) -> Interaction:
    """Fewer seeds than environments: the repeated-measures F with the lower-bound
    (Greenhouse-Geisser) degrees of freedom ``(1, n - 1)``, conservative whatever the
    covariance between environments."""
    n, e = m.shape
    grand = m.mean()
    ss_env = n * float(((m.mean(axis=0) - grand) ** 2).sum())
    resid = m - m.mean(axis=1, keepdims=True) - m.mean(axis=0, keepdims=True) + grand
    ss_err = float((resid**2).sum())
    f = (ss_env / (e - 1)) / (ss_err / ((e - 1) * (n - 1))) if ss_err > 0 else \
        (np.inf if ss_env > 0 else 0.0)
    p = float(sps.f.sf(f, 1.0, n - 1.0)) if np.isfinite(f) else 0.0
    return Interaction("repeated-measures F (lower bound)", None, None, float(f),
                       (1.0, float(n - 1)), p, n)


def independent_interaction(diffs: Sequence[float], variances: Sequence[float],
                            dfs: Sequence[float], n_seeds: int,
                            confidence: float = 0.95) -> Interaction:
    """The interaction from each environment's ``(D_e, V_e, f_e)``
    (:func:`environment_difference`): float (E,) each, ``E >= 2``, ``V_e > 0``."""
    dd, vv, ff = (np.asarray(a, dtype=float) for a in (diffs, variances, dfs))
    e = dd.size
    if e < 2 or np.any(vv <= 0):
        raise ValueError("need 2+ environments, each with a positive variance")
    if e == 2:
        v = float(vv.sum())
        df = v**2 / float((vv**2 / ff).sum())
        return _t("Welch t", float(dd[0] - dd[1]), float(np.sqrt(v)), df, confidence,
                  n_seeds)
    w = 1.0 / vv
    mean = float((w * dd).sum() / w.sum())
    a = float((w * (dd - mean) ** 2).sum()) / (e - 1)
    lam = 3.0 * float((((1 - w / w.sum()) ** 2) / ff).sum()) / (e**2 - 1)
    f = a / (1 + 2 * (e - 2) * lam / 3)
    df1, df2 = float(e - 1), 1.0 / lam
    return Interaction("Welch F", None, None, f, (df1, df2), float(sps.f.sf(f, df1, df2)),
                       n_seeds)


def _t(test: str, est: float, se: float, df: float, confidence: float, n: int
       ) -> Interaction:
    """A t-based interaction: estimate, interval, two-sided p."""
    if se == 0:
        p = 1.0 if est == 0 else 0.0
        return Interaction(test, est, (est, est), float("inf") if est else 0.0, (df,), p, n)
    t = est / se
    q = float(sps.t.ppf(0.5 + confidence / 2, df))
    return Interaction(test, est, (est - q * se, est + q * se), float(t), (df,),
                       float(2 * sps.t.sf(abs(t), df)), n)
