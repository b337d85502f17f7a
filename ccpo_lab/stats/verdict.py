"""The one-word verdict of a comparison: 'better', 'worse' or 'unresolved'.

The rule is deliberately conservative: an arm is called better or worse than the
reference only when *both* arms have at least two seeds and the Holm-adjusted
p-value is below alpha. A single seed on either side is always 'unresolved',
however large the difference looks (one 128-episode evaluation alone carries
about +/-5 points; a best single evaluation is biased upward by ~1.5 sd).

A p-value printed beside a verdict is printed so that the verdict can be read off it
(:func:`p_text`): 0.04956 at alpha 0.05 is ``0.0496``, never ``0.050``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ccpo_lab.stats.checks import check_unit

__all__ = ["Verdict", "VerdictLabel", "p_bound_text", "p_text", "verdict"]

P_FLOOR = 0.001
"""p below this prints as ``<0.001`` (where that reads the same against the threshold)."""

VerdictLabel = Literal["better", "worse", "unresolved"]


@dataclass(frozen=True)
class Verdict:
    """Outcome of :func:`verdict`.

    Attributes:
        label: 'better' / 'worse' (X vs the reference) or 'unresolved'.
        reason: one line saying why, for tables and logs (no trailing period), e.g.
            ``"p_holm = 0.55 >= 0.05; about 38 seeds per arm needed"``.
        seeds_needed: the seeds-per-arm estimate passed in (None if unknown or not
            applicable); only meaningful for 'unresolved'.
    """

    label: VerdictLabel
    reason: str
    seeds_needed: int | None


def p_text(p: float, threshold: float | None = None, *, strict: bool = True) -> str:
    """``p`` with three decimals (``<0.001`` below 0.001), or with as many more as it
    takes for the printed value to compare with ``threshold`` as ``p`` does.

    ``strict``: the decision is ``p < threshold`` (a verdict at alpha); else
    ``p <= threshold`` (an adaptive design's boundary). With ``threshold`` None, three
    decimals. A nan ``p`` is ``nan``.
    """
    if not math.isfinite(p):
        return "nan"

    def below(x: float) -> bool:
        assert threshold is not None
        return x < threshold if strict else x <= threshold

    if p < P_FLOOR and (threshold is None or threshold >= P_FLOOR):
        return f"<{P_FLOOR:g}"
    for decimals in range(3, 17):
        text = f"{p:.{decimals}f}"
        if threshold is None or (below(float(text)) == below(p) and (float(text) or not p)):
            return text
    return repr(p)


def p_bound_text(p: float, bound: float) -> tuple[str, str]:
    """``p`` and the boundary it is rejected at (``p <= bound``: an adaptive design's
    nominal level), printed so the decision reads off them: the boundary with three
    significant digits, or more where that rounds it across ``p``; ``p`` with enough
    decimals (:func:`p_text`) against the boundary as printed."""
    text = f"{bound:.3g}"
    for digits in range(3, 17):
        text = f"{bound:.{digits}g}"
        if (p <= float(text)) == (p <= bound):
            break
    return p_text(p, float(text), strict=False), text


def _p_is(p: float, alpha: float) -> str:
    text = p_text(p, alpha)
    return f"p_holm {text[0]} {text[1:]}" if text.startswith("<") else f"p_holm = {text}"


def _needed(seeds_needed: int | None) -> str:
    return "" if seeds_needed is None else f"; about {int(seeds_needed)} seeds per arm needed"


def verdict(
    diff: float,
    p_holm: float,
    n_x: int,
    n_y: int,
    seeds_needed: int | None = None,
    alpha: float = 0.05,
) -> Verdict:
    """Classify a comparison of arm X against the reference Y.

    Args:
        diff: estimated ``X - Y`` (:attr:`Comparison.diff`); its sign gives the direction.
        p_holm: Holm-adjusted p-value of this comparison (:func:`holm`), nan if untested.
        n_x, n_y: non-nan seeds of X and of Y.
        seeds_needed: seeds per arm to resolve the difference (:func:`seeds_needed`),
            or None; it is quoted in the reason of an 'unresolved' verdict.
        alpha: family-wise level, in (0, 1).

    Returns:
        :class:`Verdict`: 'better' if ``diff > 0``, 'worse' if ``diff < 0``, when
        ``n_x >= 2``, ``n_y >= 2`` and ``p_holm < alpha``; 'unresolved' otherwise
        (also for nan ``diff``/``p_holm`` and for ``diff == 0``).
    """
    check_unit(alpha, "alpha")
    n_x, n_y = int(n_x), int(n_y)
    if n_x < 2 or n_y < 2:
        reason = f"n = {n_x} vs {n_y} seeds: at least 2 per arm are needed to compare"
        return Verdict("unresolved", reason + _needed(seeds_needed), seeds_needed)
    if not (np.isfinite(diff) and np.isfinite(p_holm)):
        reason = "no test possible (no spread between seeds, or missing values)"
        return Verdict("unresolved", reason + _needed(seeds_needed), seeds_needed)
    if p_holm < alpha and diff != 0.0:
        label: VerdictLabel = "better" if diff > 0.0 else "worse"
        return Verdict(label, f"{_p_is(p_holm, alpha)} < {alpha:g}", None)
    reason = f"{_p_is(p_holm, alpha)} >= {alpha:g}"
    return Verdict("unresolved", reason + _needed(seeds_needed), seeds_needed)
