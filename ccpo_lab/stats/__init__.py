"""Statistics of ccpo-lab studies: pure numpy/scipy functions over arrays.

Layers (each a module; all re-exported here):

* :mod:`.run` -- one run's evaluation series: converged-window summary, best
  evaluation with its expected upward bias, binomial se, interim flag, the rise of the
  window over the first evaluation.
* :mod:`.aggregate` -- one arm over seeds (mean, sd, t-interval) and rliable's
  aggregates over ``(runs, tasks)`` matrices (mean, median, IQM, optimality gap).
* :mod:`.bootstrap` -- vectorised percentile bootstrap over seeds and
  stratified over ``(runs, tasks)``, with an explicit ``numpy.random.Generator``.
* :mod:`.improvement` -- probability of improvement P(X > Y) and its interval.
* :mod:`.compare` -- X vs reference Y (paired by seed or Welch), Holm correction.
* :mod:`.power` -- Colas et al. 2018 power: type-II error, seeds needed,
  minimal detectable difference, for Welch's test and for the paired test.
* :mod:`.verdict` -- 'better' / 'worse' / 'unresolved'.
* :mod:`.family` -- every arm vs one reference (or explicit pairs) in one call (tests, the
  family's adjustment, power, verdicts): the recommended entry point for a study table.
  Each comparison's interval, p and seeds-needed come from the same test.
* :mod:`.fixed_family` -- the fixed-seed family: the adaptive design's default rule with
  one look (Holm's step-down at Šidák's levels over each comparison's own test).
* :mod:`.checks` -- argument checks shared by the modules above.
* :mod:`.sequential` -- group-sequential tests for adaptive seeds: Lan-DeMets alpha
  spending, boundaries calibrated for t-tests at few seeds, Holm across looks and
  comparisons, non-binding futility (used by :mod:`ccpo_lab.adaptive`).
* :mod:`.joint` -- the joint max-statistic group-sequential boundary of the comparisons
  sharing a reference (the adaptive design's default family), each comparison on its own
  variance or on the family's pooled one.
* :mod:`.correlation` -- two arms' correlation across their common seeds, with its interval.

Conventions: nan marks a missing value; inputs' nan entries are dropped where a
per-seed or per-evaluation vector is expected, and propagate (result nan) where
a full ``(runs, tasks)`` matrix is expected. Degenerate data (too few seeds, no
spread) gives nan, never an exception or inf; malformed input (wrong shapes,
inf, duplicate seeds) raises ``ValueError``; a non-Generator ``rng`` raises
``TypeError``.
"""

from ccpo_lab.stats.aggregate import (
    ArmSummary,
    aggregate_iqm,
    aggregate_mean,
    aggregate_median,
    aggregate_optimality_gap,
    summarize_arm,
    t_interval,
)
from ccpo_lab.stats.bootstrap import (
    BRADLEY_LIBERAL,
    DEFAULT_N_REPS,
    Interval,
    bootstrap_ci,
    bootstrap_distribution,
    bootstrap_min_runs,
    percentile_coverage,
    percentile_interval,
    stratified_bootstrap_ci,
    stratified_bootstrap_distribution,
)
from ccpo_lab.stats.compare import Comparison, compare_arms, compare_summaries, holm
from ccpo_lab.stats.family import (
    ArmVersusReference,
    compare_pairs,
    compare_to_reference,
    comparison_power,
    family_level,
)
from ccpo_lab.stats.improvement import (
    probability_of_improvement,
    probability_of_improvement_ci,
    probability_of_improvement_distribution,
)
from ccpo_lab.stats.power import (
    minimal_detectable_difference,
    paired_minimal_detectable_difference,
    paired_seeds_needed,
    paired_type2_error,
    seeds_needed,
    welch_type2_error,
)
from ccpo_lab.stats.run import (
    BestEvaluation,
    Rise,
    WindowSummary,
    best_evaluation,
    binomial_se,
    expected_max_normal,
    is_interim,
    rise_over_start,
    window_summary,
)
from ccpo_lab.stats.sequential import (
    SPENDING_FUNCTIONS,
    alpha_spent,
    calibrated_levels,
    normal_boundaries,
    step_down,
)
from ccpo_lab.stats.verdict import Verdict, VerdictLabel, p_bound_text, p_text, verdict

__all__ = [
    "BRADLEY_LIBERAL",
    "DEFAULT_N_REPS",
    "SPENDING_FUNCTIONS",
    "ArmSummary",
    "ArmVersusReference",
    "BestEvaluation",
    "Comparison",
    "Interval",
    "Rise",
    "Verdict",
    "VerdictLabel",
    "WindowSummary",
    "aggregate_iqm",
    "aggregate_mean",
    "aggregate_median",
    "aggregate_optimality_gap",
    "alpha_spent",
    "best_evaluation",
    "binomial_se",
    "bootstrap_ci",
    "bootstrap_distribution",
    "calibrated_levels",
    "bootstrap_min_runs",
    "compare_arms",
    "compare_pairs",
    "compare_summaries",
    "compare_to_reference",
    "comparison_power",
    "expected_max_normal",
    "family_level",
    "holm",
    "is_interim",
    "minimal_detectable_difference",
    "normal_boundaries",
    "p_bound_text",
    "p_text",
    "paired_minimal_detectable_difference",
    "paired_seeds_needed",
    "paired_type2_error",
    "percentile_coverage",
    "percentile_interval",
    "probability_of_improvement",
    "probability_of_improvement_ci",
    "probability_of_improvement_distribution",
    "rise_over_start",
    "seeds_needed",
    "step_down",
    "stratified_bootstrap_ci",
    "stratified_bootstrap_distribution",
    "summarize_arm",
    "t_interval",
    "verdict",
    "welch_type2_error",
    "window_summary",
]
