"""Every arm against the reference: one test gives the interval, p and seeds needed.

Per comparison (X = the arm, Y = the reference, one value per seed = the converged-window
mean) :func:`ccpo_lab.stats.compare_to_reference` runs the paired t-test by seed when both
arms have at least two common seeds, Welch otherwise; Holm-corrects the p-values across
the comparisons; and computes, with that same test (paired: from the sd of the per-seed
differences), the seeds needed to resolve the observed difference and the smallest
difference the current seeds resolve (Colas et al. 2018, two-sided, at alpha / m for m
comparisons, at the report's power), and the verdict. Added here: P(X > Y) = Mann-Whitney
U / (n_x n_y) with its bootstrap interval where that meets its level, step-1 identity, and
for an arm with one seed (no sd across seeds) Welch power figures that assume its seed sd
equals its within-run sd of evaluations (flagged). Such a comparison is always
``unresolved``. Each row also carries the correlation of the two arms' scores across
their common seeds, with its Fisher-z interval, and what it means for the test used
(:func:`correlation_note`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ccpo_lab.report.model import ArmRow, ComparisonRow
from ccpo_lab.report.numbers import NO_INTERVAL, Pair, interval, num, rng_for
from ccpo_lab.report.settings import ReportSettings
from ccpo_lab.runs.verify import step1_agreement

N_MAX = 1000
"""Largest seed count searched by the seeds-needed estimate."""


def _per_seed(arm: ArmRow) -> tuple[np.ndarray, np.ndarray]:
    """Seeds with a window mean and their means: int (n,), float (n,)."""
    items = [(k, r.mean) for k, r in arm.per_seed.items() if r.mean is not None]
    seeds = np.array([k for k, _ in items], dtype=np.int64)
    return seeds, np.array([m for _, m in items], dtype=np.float64)


def _fingerprints(arm: ArmRow) -> dict[int, str | None]:
    """Step-1 fingerprints of the seeds that enter a comparison (those with a mean)."""
    return {k: r.fingerprint for k, r in arm.per_seed.items() if r.mean is not None}


def power_sd(arm: ArmRow) -> tuple[float, bool]:
    """The sd used for power: across seeds, else (one seed) the within-run sd (assumed)."""
    if arm.sd is not None:
        return float(arm.sd), False
    if arm.within_run_sd is not None:
        return float(arm.within_run_sd), True
    return float("nan"), False


def verdict_text(label: str, needed: int | None, resolvable: bool, assumed: bool) -> str:
    """``better``, ``worse``, ``unresolved (about N seeds needed)`` and variants."""
    if label != "unresolved":
        return label
    star = ", sd assumed" if assumed else ""
    if needed is not None:
        return f"unresolved (about {needed} seeds needed{star})"
    if resolvable:
        return f"unresolved (more than {N_MAX} seeds needed{star})"
    return "unresolved"


def correlation_note(r: float, low: float, high: float, n: int, test: str) -> str:
    """What the arms' correlation across seeds means for the test used (one line)."""
    if not np.isfinite(r):
        return "" if n < 3 else "no correlation: an arm has no spread across seeds"
    iv = f" [{low:.2f}, {high:.2f}]" if np.isfinite(low) else ""
    what = f"seed correlation {r:.2f}{iv} over {n} seeds"
    if test == "paired":
        if np.isfinite(low) and low > 0:
            return f"{what}: the seeds share an effect; pairing removes it"
        if np.isfinite(high) and high < 0:
            return f"{what}: negative; the paired test is conservative here"
        return (f"{what}: no clear shared seed effect; pairing keeps {n - 1} df where an "
                f"unpaired test has {2 * n - 2} (declare test: unpaired before the data, "
                "never after, only for arms whose seeds share nothing)")
    if np.isfinite(low) and low > 0:
        return f"{what}: the seeds share an effect an unpaired test leaves in its noise"
    return f"{what}: the unpaired test fits"


def _improvement(x: np.ndarray, y: np.ndarray, arm: str, s: ReportSettings,
                 boot_min: int) -> tuple[float, Pair]:
    """P(X > Y) over seeds, and its bootstrap interval when both arms have ``boot_min``
    seeds (below that it cannot reach the level: none is given)."""
    from ccpo_lab.stats import probability_of_improvement, probability_of_improvement_ci

    poi = probability_of_improvement(x, y) if x.size and y.size else float("nan")
    if min(x.size, y.size) < boot_min:
        return float(poi), NO_INTERVAL
    iv = probability_of_improvement_ci(x, y, rng_for(s.rng_seed, "poi", arm), s.confidence,
                                       s.bootstrap_reps)
    return float(poi), interval(iv.low, iv.high)


def comparison_rows(arms: Sequence[ArmRow], s: ReportSettings) -> tuple[ComparisonRow, ...]:
    """The comparison rows: every arm but the reference, in arm order, or the settings'
    explicit ``pairs`` in their order.

    The family (tests, the adaptive design's rule at one look, power, verdicts) is
    :func:`ccpo_lab.stats.compare_pairs`;
    this adds P(X > Y) and its interval, step-1 identity, and the assumed-sd power figures
    of one-seed arms.
    """
    from ccpo_lab.stats import bootstrap_min_runs, compare_pairs, seeds_needed, verdict
    from ccpo_lab.stats.correlation import seed_correlation

    by_name: Mapping[str, ArmRow] = {a.arm: a for a in arms}
    per_seed = {name: _per_seed(a) for name, a in by_name.items()}
    pairs = list(s.pairs) or [(a, s.reference) for a in by_name if a != s.reference]
    rows = compare_pairs({name: v for name, (_, v) in per_seed.items()}, pairs,
                         {name: k for name, (k, _) in per_seed.items()}, s.confidence,
                         s.alpha, s.power, N_MAX)
    boot_min = bootstrap_min_runs(s.confidence)
    out = []
    for row in rows:
        c, arm, ref = row.comparison, by_name[row.arm], by_name[row.reference]
        fp_y = _fingerprints(ref)
        sd_y, assumed_y = power_sd(ref)
        sd_x, assumed_x = power_sd(arm)
        if c.test == "paired":  # the paired test's power comes from the differences' sd
            spread = bool(np.isfinite(c.sd_diff) and c.sd_diff > 0)
        else:
            spread = bool(np.isfinite(sd_x) and np.isfinite(sd_y) and (sd_x > 0 or sd_y > 0))
        resolvable = bool(np.isfinite(c.diff) and c.diff != 0.0 and spread)
        needed, v = row.seeds_needed, row.verdict
        assumed = needed is None and resolvable and (assumed_x or assumed_y)
        if assumed:
            needed = seeds_needed(c.diff, sd_x, sd_y, row.power_alpha, s.power, n_max=N_MAX,
                                  two_sided=True)
            v = verdict(c.diff, row.p_holm, c.n_x, c.n_y, needed, s.alpha)
        poi, ci_poi = _improvement(per_seed[row.arm][1], per_seed[row.reference][1], row.arm,
                                   s, boot_min)
        agree = step1_agreement(_fingerprints(arm), fp_y)
        r, r_lo, r_hi, r_n = seed_correlation(per_seed[row.arm][1], per_seed[row.reference][1],
                                              per_seed[row.arm][0],
                                              per_seed[row.reference][0], s.confidence)
        out.append(ComparisonRow(
            arm=row.arm, reference=row.reference, paired=c.test == "paired", test=c.test,
            n_x=c.n_x, n_y=c.n_y, n_pairs=c.n_pairs, diff=num(c.diff),
            ci=interval(c.ci_low, c.ci_high), p=num(row.p_test), p_holm=num(row.p_holm),
            prob_improvement=num(poi), ci_prob_improvement=ci_poi, seeds_needed=needed,
            min_detectable_diff=num(row.mdd), power_alpha=row.power_alpha,
            power_sd_assumed=assumed, verdict=v.label,
            verdict_text=verdict_text(v.label, needed, resolvable, assumed), reason=v.reason,
            step1_verified=agree.verified, step1=agree.status, step1_detail=agree.detail,
            seed_correlation=num(r), ci_seed_correlation=interval(r_lo, r_hi),
            seed_correlation_note=correlation_note(r, r_lo, r_hi, r_n, c.test),
        ))
    return tuple(out)
