"""Every arm against one reference arm (or explicit pairs of arms), as one family: tests,
the family-wise adjustment, power, verdicts.

This is the recommended entry point for a study table; it wires :func:`compare_arms`,
the fixed-seed family (:mod:`ccpo_lab.stats.fixed_family`: the adaptive design's default
rule with one look, Holm's step-down at Šidák's levels over each comparison's own test),
:func:`seeds_needed`, :func:`minimal_detectable_difference` and :func:`verdict` together
consistently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ccpo_lab.stats.aggregate import finite_values
from ccpo_lab.stats.checks import check_unit
from ccpo_lab.stats.compare import Comparison, compare_arms
from ccpo_lab.stats.fixed_family import fixed_family
from ccpo_lab.stats.power import (
    minimal_detectable_difference,
    paired_minimal_detectable_difference,
    paired_seeds_needed,
    seeds_needed,
)
from ccpo_lab.stats.verdict import Verdict, verdict

__all__ = ["ArmVersusReference", "compare_pairs", "compare_to_reference", "comparison_power",
           "family_level"]


@dataclass(frozen=True)
class ArmVersusReference:
    """One row of the family of comparisons against the reference.

    Attributes:
        arm: the arm's name.
        comparison: :class:`Comparison` of the arm (X) with the reference (Y).
        p_holm: the adjusted p over the family (nan if the test was degenerate): Holm's
            step-down at Šidák's levels on :attr:`p_test` when every comparison shares
            one baseline, Holm's on each test's own p otherwise
            (:func:`ccpo_lab.stats.fixed_family.fixed_family`).
        seeds_needed: seeds per arm for 80% power (by default) to detect the
            observed ``|diff|`` with the comparison's own test, two-sided, at
            :attr:`power_alpha`: the paired test from the sd of the per-seed differences
            when the comparison is paired, Welch's from the two arms' sds otherwise. None
            when not computable (< 2 seeds or pairs, zero spread, diff 0) or above
            ``n_max``. An unresolved comparison always needs more seeds than it has.
        mdd: minimal detectable difference at the current seeds (pairs for a paired
            comparison, ``min(n_x, n_y)`` for Welch), same test, level and power; nan
            when not computable.
        verdict: :class:`Verdict`.
        power_alpha: the level of the power figures: ``alpha / m`` over the ``m``
            comparisons against the reference (Bonferroni), the smallest threshold
            the step-down can apply to a comparison (Šidák's is a little above it); so
            a comparison predicted to be resolved at ``seeds_needed`` seeds is resolved
            whatever its rank.
    """

    arm: str
    comparison: Comparison
    p_holm: float
    seeds_needed: int | None
    mdd: float
    verdict: Verdict
    power_alpha: float
    reference: str = ""
    """The arm it was compared with (Y)."""
    p_test: float = float("nan")
    """The comparison's p under the family's rule: the paired t's, or for an unpaired
    comparison the calibrated maximum test of Welch's t and the ranks' t
    (:func:`ccpo_lab.stats.fixed_family.comparison_p`); the test's own p when the pairs
    have different baselines."""


def _sd(values: ArrayLike) -> float:
    a = finite_values(values)
    return float(np.std(a, ddof=1)) if a.size >= 2 else float("nan")


def compare_to_reference(
    values: Mapping[str, ArrayLike],
    reference: str,
    seeds: Mapping[str, ArrayLike] | None = None,
    confidence: float = 0.95,
    alpha: float = 0.05,
    power: float = 0.8,
    n_max: int = 1000,
) -> list[ArmVersusReference]:
    """Compare every arm with ``reference``; the family's adjustment; power; verdicts.

    Args:
        values: arm name -> float (n_seeds,), one value per seed (window means);
            nan entries are missing seeds.
        reference: the name of the reference arm (a key of ``values``).
        seeds: optional arm name -> int (n_seeds,) seed labels aligned with
            ``values``; when given for both arms of a comparison, the comparison is
            paired on common seeds (see :func:`compare_arms`).
        confidence: level of each difference's interval.
        alpha: family-wise level for the verdicts.
        power: target power for ``seeds_needed`` and ``mdd`` (at ``alpha / m``, see
            :attr:`ArmVersusReference.power_alpha`).
        n_max: largest seed count searched by ``seeds_needed``.

    Returns:
        One :class:`ArmVersusReference` per non-reference arm, in ``values`` order.
        The family is these comparisons; untestable ones (nan p) do not count.

    Raises:
        KeyError: if ``reference`` is not in ``values``.
        ValueError: on malformed arrays (see :func:`compare_arms`).
    """
    if reference not in values:
        raise KeyError(f"reference arm {reference!r} not among {sorted(values)}")
    pairs = [(a, reference) for a in values if a != reference]
    return compare_pairs(values, pairs, seeds, confidence, alpha, power, n_max)


def compare_pairs(
    values: Mapping[str, ArrayLike],
    pairs: Sequence[tuple[str, str]],
    seeds: Mapping[str, ArrayLike] | None = None,
    confidence: float = 0.95,
    alpha: float = 0.05,
    power: float = 0.8,
    n_max: int = 1000,
) -> list[ArmVersusReference]:
    """Compare each ``(arm, reference)`` pair; the family's adjustment over the pairs;
    power; verdicts. Arguments and rows as :func:`compare_to_reference` (which is this with
    every arm paired with one reference), one row per pair, in ``pairs`` order.

    Raises:
        KeyError: if an arm of a pair is not in ``values``.
    """
    for pair in pairs:
        for name in pair:
            if name not in values:
                raise KeyError(f"arm {name!r} of pair {pair!r} not among {sorted(values)}")
    seeds = seeds or {}
    cmps = [compare_arms(values[a], values[r], seeds.get(a), seeds.get(r), confidence)
            for a, r in pairs]
    p_test, p_adj = fixed_family(cmps, values, pairs)
    level = family_level(alpha, len(pairs))
    rows: list[ArmVersusReference] = []
    for (name, ref), c, p, pt in zip(pairs, cmps, p_adj, p_test, strict=True):
        need, mdd = comparison_power(c, _sd(values[name]), _sd(values[ref]), level, power,
                                     n_max)
        v = verdict(c.diff, float(p), c.n_x, c.n_y, seeds_needed=need, alpha=alpha)
        rows.append(ArmVersusReference(name, c, float(p), need, mdd, v, level, ref,
                                       float(pt)))
    return rows


def family_level(alpha: float, m: int) -> float:
    """``alpha / m``: the level of the power figures of a family of ``m`` comparisons."""
    check_unit(alpha, "alpha")
    return float(alpha) / max(int(m), 1)


def comparison_power(c: Comparison, sd_x: float, sd_y: float, level: float, power: float,
               n_max: int = 1000) -> tuple[int | None, float]:
    """Seeds needed and minimal detectable difference of ``c`` under its own test.

    Paired: from ``c.sd_diff`` over ``c.n_pairs`` pairs; Welch: from the arms' sds
    ``sd_x``, ``sd_y`` at ``min(n_x, n_y)`` seeds. Two-sided, at ``level``.

    Returns:
        ``(seeds_needed or None, mdd or nan)``.
    """
    nan = float("nan")
    if not np.isfinite(c.diff):
        return None, nan
    if c.test == "paired":
        need = paired_seeds_needed(c.diff, c.sd_diff, level, power, n_max, two_sided=True)
        mdd = paired_minimal_detectable_difference(c.sd_diff, c.n_pairs, level, power,
                                                   two_sided=True)
        return need, mdd
    need = seeds_needed(c.diff, sd_x, sd_y, level, power, n_max, two_sided=True)
    n = min(c.n_x, c.n_y)
    mdd = minimal_detectable_difference(sd_x, sd_y, n, level, power, two_sided=True) \
        if n >= 2 else nan
    return need, mdd
