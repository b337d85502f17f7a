"""The typed report: frozen rows for runs, arms and comparisons, and the document.

:func:`ccpo_lab.report.analysis.build_report` computes a :class:`ReportModel`; every
output is rendered from it: the JSON document (:func:`to_plain`, the schema documented in
the README), the CSV tables (:func:`csv_header` / :func:`csv_row`: headers come from the
fields, so they cannot drift from the rows), Markdown and LaTeX
(:mod:`ccpo_lab.report.tables`) and the figures. Values are in the metric's own units as
logged (fractions for success rates); None is undefined (JSON null).

To add a section: add a frozen row type here and a field to :class:`ReportModel` (it
appears in the JSON by itself), then a table builder in :mod:`ccpo_lab.report.tables`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ccpo_lab.report.numbers import NO_INTERVAL, Pair
from ccpo_lab.report.settings import ResolvedAnalysis

if TYPE_CHECKING:
    from ccpo_lab.report.evaluation import EvaluationSection

INTERVAL = {"interval": True}
"""Field metadata of an interval ``(low, high)``: two CSV columns ``<name>_low/_high``."""
NESTED = {"csv": False}
"""Field metadata of a container (rows, lists, mappings): JSON only, not a CSV column."""


@dataclass(frozen=True)
class TaskStat:
    """One column of the per-task-type table for one arm (over its seeds)."""

    mean: float | None
    """Mean over seeds of the seeds' converged-window means."""
    sd: float | None
    """sd across seeds (ddof=1); None below two seeds."""
    ci_t: Pair = field(metadata=INTERVAL)
    """t interval of the mean at the report's confidence."""
    n_seeds: int
    """Seeds with a value."""


@dataclass(frozen=True)
class SeedRow:
    """One run (an arm's seed): its converged window and status."""

    mean: float | None
    """Mean of the held-out evaluations at step >= window_start."""
    sd: float | None
    """Their sd (ddof=1)."""
    n_evals: int
    """Evaluations in the window."""
    best: float | None
    """Best evaluation in the window."""
    best_step: int | None
    """Its step."""
    best_bias: float | None
    """Expected upward bias of the best of ``n_evals`` evaluations (metric units)."""
    best_bias_sd: float | None
    """The same in sds (expected maximum of ``n_evals`` standard normal draws)."""
    binomial_se: float | None
    """Binomial standard error of one evaluation at the window mean."""
    n_episodes: int | None
    """Held-out episodes per evaluation."""
    interim: bool
    """Not yet at its final step."""
    last_step: int | None
    """Last step with a metrics row."""
    total_steps: int | None
    """Final step (None: unknown)."""
    state: str | None
    """``state.json`` state."""
    dir: str
    """Run directory name (``seed-<k>[.<n>]``)."""
    run_id: str | None
    """Run id."""
    fingerprint: str | None
    """Step-1 rollout fingerprint."""
    per_task: dict[str, float | None] = field(metadata=NESTED)
    """Window mean per task-type column (Pick..Pick2, All, Turns)."""
    turns_from_training: bool
    """Turns from training episodes (held-out turns not logged)."""
    error: str | None
    """Why the run's metrics could not be read (then it is left out)."""
    start: float | None
    """First held-out evaluation before the window (normally step 0)."""
    start_step: int | None
    """Its step."""


@dataclass(frozen=True)
class RiseRow:
    """The converged window against the first evaluation, over an arm's seeds."""

    start: float | None
    """Mean first evaluation."""
    start_steps: tuple[int, ...] = field(metadata=NESTED)
    """Steps of the first evaluations."""
    window: float | None
    """Mean window mean of the same seeds."""
    rise: float | None
    """``window - start``."""
    se: float | None
    """Binomial se of the rise (evaluation noise only)."""
    z: float | None
    """``rise / se``."""
    n_seeds: int
    """Seeds with both."""
    n_rose: int
    """Seeds whose window lies above their first evaluation."""


@dataclass(frozen=True)
class ArmRow:
    """One arm over its seeds."""

    arm: str
    """Arm name."""
    n_seeds: int
    """Seeds with a window mean."""
    seeds: tuple[int, ...] = field(metadata=NESTED)
    """Every seed with a run directory (listed, never hidden)."""
    mean: float | None
    """Mean over seeds of the window means."""
    sd: float | None
    """sd across seeds (ddof=1)."""
    ci_t: Pair = field(metadata=INTERVAL)
    """Student t interval of the mean: the interval to cite at a small number of seeds."""
    ci_bootstrap: Pair = field(metadata=INTERVAL)
    """Percentile-bootstrap interval of the mean; None below ``bootstrap_min_seeds``."""
    iqm: float | None
    """Interquartile mean over seeds x the six task types (rliable)."""
    ci_iqm: Pair = field(metadata=INTERVAL)
    """Its stratified bootstrap interval; None below ``iqm_bootstrap_min_seeds``."""
    iqm_n_seeds: int
    """Seeds with all six task types (those entering the IQM)."""
    n_evals: int
    """Window evaluations over all seeds."""
    within_run_sd: float | None
    """Root mean square of the seeds' within-window sds."""
    interim: bool
    """Some seed is not at its final step."""
    interim_seeds: tuple[int, ...] = field(metadata=NESTED)
    """Those seeds."""
    turns_from_training: bool
    """Some seed's Turns come from training episodes."""
    per_seed: dict[int, SeedRow] = field(metadata=NESTED)
    """Each seed's row (JSON keys are strings)."""
    per_task: dict[str, TaskStat] = field(metadata=NESTED)
    """Each task-type column (Pick..Pick2, All, Turns)."""
    rise: RiseRow = field(metadata=NESTED)
    """The rise over the first evaluation."""
    semantics: str = "described"
    """What its estimator computed (its runs' ``run.json``): ``described`` (the method as
    written) or ``as-run`` (what the published trainers computed on the batch they
    passed); ``mixed`` when its runs disagree."""


@dataclass(frozen=True)
class ComparisonRow:
    """One arm X against the reference Y: one test gives the interval, p and power."""

    arm: str
    """X."""
    reference: str
    """Y."""
    paired: bool
    """Paired by seed (else Welch)."""
    test: str
    """``paired`` or ``welch``."""
    n_x: int
    """Seeds of X."""
    n_y: int
    """Seeds of Y."""
    n_pairs: int
    """Seeds in both."""
    diff: float | None
    """X - Y (mean of the per-seed differences when paired)."""
    ci: Pair = field(metadata=INTERVAL)
    """The test's t interval of ``diff``."""
    p: float | None
    """The test's two-sided p: the paired t's, or for an unpaired comparison the
    calibrated maximum test of Welch's t and the ranks' t
    (:func:`ccpo_lab.stats.fixed_family.comparison_p`)."""
    p_holm: float | None
    """The adjusted p over the comparisons: Holm's step-down at Šidák's levels when they
    share one baseline (the adaptive design's default rule with one look), Holm's
    otherwise."""
    prob_improvement: float | None
    """P(X > Y): the chance a seed of X beats a seed of Y (Mann-Whitney U / n_x n_y)."""
    ci_prob_improvement: Pair = field(metadata=INTERVAL)
    """Its independent bootstrap interval; None below ``bootstrap_min_seeds`` per arm."""
    seeds_needed: int | None
    """Seeds per arm for the report's power at ``|diff|`` under this test at
    ``power_alpha`` (None: not computable or above 1,000)."""
    min_detectable_diff: float | None
    """Smallest difference the current seeds detect (same test, level and power)."""
    power_alpha: float
    """Level of the power figures: alpha / number of comparisons."""
    power_sd_assumed: bool
    """An arm has one seed: its sd across seeds is assumed to be its within-run sd."""
    verdict: str
    """``better``, ``worse`` or ``unresolved``."""
    verdict_text: str
    """The verdict with its seeds-needed figure, for tables."""
    reason: str
    """Why (one line)."""
    step1_verified: bool
    """Step-1 rollouts identical on every common seed."""
    step1: str
    """``verified``, ``different`` or ``not verified``."""
    step1_detail: str
    """What was checked."""
    adaptive: bool = False
    """The verdict, seeds needed and reason come from the sweep's adaptive design (its
    group-sequential looks, :class:`AdaptiveSection`), not from this row's fixed-sample
    test; ``p_holm`` is then None (a fixed-sample Holm re-test is not its test)."""
    seed_correlation: float | None = None
    """Correlation of X's and Y's scores across their common seeds (None below 3)."""
    ci_seed_correlation: Pair = field(default=NO_INTERVAL, metadata=INTERVAL)
    """Its Fisher-z interval at the report's confidence (None below 4 common seeds)."""
    seed_correlation_note: str = ""
    """What the correlation means for the test used (one line)."""


@dataclass(frozen=True)
class AdaptiveLookRow:
    """One comparison at one look of an adaptive design: its test, the boundary in force,
    the decision and why (:class:`ccpo_lab.adaptive.Decision`)."""

    look: int
    """Look number (1 = the listed seeds)."""
    arm: str
    """X; the difference is ``arm - baseline``."""
    baseline: str
    """Y."""
    n_x: int
    """Seeds of the arm with a value at this look."""
    n_y: int
    """Seeds of the baseline with a value."""
    test: str
    """``paired`` or ``welch``."""
    diff: float | None
    """Mean difference."""
    t: float | None
    """t statistic."""
    df: float | None
    """Its degrees of freedom."""
    p: float | None
    """Two-sided p-value of this look's t-test (unadjusted)."""
    level: float
    """Holm share of alpha in force: ``alpha / r`` for ``r`` comparisons not rejected."""
    alpha_spent: float | None
    """Cumulative alpha that ``level`` has spent by this look (Lan-DeMets)."""
    nominal: float | None
    """The boundary as a nominal level: rejected when ``p <= nominal``."""
    boundary_t: float | None
    """The same boundary as ``|t|``."""
    action: str
    """``better``, ``worse``, ``continue``, ``futile`` or ``unresolved``."""
    seeds_needed: int | None
    """Seeds per arm for the design's power at the observed difference, at the final
    look's nominal level (None: unknown or above 1,000)."""
    reason: str
    """Why, in one line."""


@dataclass(frozen=True)
class AdaptiveVerdictRow:
    """A comparison's final (or latest) decision in an adaptive design."""

    arm: str
    """X."""
    baseline: str
    """Y."""
    verdict: str
    """``better``, ``worse`` or ``unresolved`` (futile, at the maximum, or still open)."""
    verdict_text: str
    """The verdict with its seeds-needed figure, or ``continuing (look in progress)``."""
    closed: bool
    """No more seeds go to this comparison."""
    look: int
    """The look of this decision."""
    n_x: int
    """Seeds of the arm it used."""
    n_y: int
    """Seeds of the baseline."""
    p: float | None
    """Its p-value at that look."""
    level: float
    """Holm level ``alpha / r`` in force (the adjusted alpha of this comparison)."""
    nominal: float | None
    """The adjusted threshold: the nominal level its p had to reach at that look."""
    boundary_t: float | None
    """The same as ``|t|``."""
    seeds_needed: int | None
    """As :attr:`AdaptiveLookRow.seeds_needed`."""
    reason: str
    """Why."""


@dataclass(frozen=True)
class AdaptiveSection:
    """The sweep's adaptive seed design (``<sweep>/adaptive.json``) and its looks."""

    max_seeds: int
    """Largest seeds per arm."""
    seeds_per_look: int
    """Seeds added per look."""
    alpha: float
    """Family-wise level over looks and comparisons."""
    power: float
    """Power of the seeds-needed and futility figures."""
    spending: str
    """Alpha-spending function."""
    futility: bool
    """Futility stops on (non-binding)."""
    futility_confidence: float
    """Its optimistic bound."""
    metric: str
    """The metric the looks' scores are the converged-window means of."""
    window_start: int
    """Their window: evaluations at step >= this."""
    finished: bool
    """Every comparison is closed."""
    arms: tuple[str, ...] = field(metadata=NESTED)
    """The design's arms."""
    seeds: tuple[dict[str, int], ...] = field(metadata=NESTED)
    """Per look, seeds with a value per arm; a last entry for a look in progress holds
    the seeds assigned to it."""
    looks: tuple[AdaptiveLookRow, ...] = field(metadata=NESTED)
    """Every decision of every look."""
    verdicts: tuple[AdaptiveVerdictRow, ...] = field(metadata=NESTED)
    """The latest decision of each comparison."""
    test: str = "paired"
    """The declared test: ``paired`` or ``unpaired``."""
    family: str = "holm"
    """``joint`` (the max-statistic step-down over one reference's comparisons) or
    ``holm``."""
    statistic: str = "mean"
    """The joint family's statistic: ``mean`` or ``mean-or-rank``."""
    variance: str = "pooled"
    """The joint family's variance: ``pooled`` or ``own``."""
    spread: Pair = field(default=NO_INTERVAL, metadata=INTERVAL)
    """The smallest and largest sd across the last look's seeds: of each arm's scores
    (unpaired) or of each comparison's per-seed differences (paired); None below 2."""


@dataclass(frozen=True)
class BaselineRow:
    """A published method's numbers."""

    method: str
    """Method."""
    per_task: dict[str, float] = field(metadata=NESTED)
    """Column (Pick..Pick2, All) -> success as a fraction."""


@dataclass(frozen=True)
class Baselines:
    """Published numbers, shown only when comparable."""

    shown: bool
    """Whether every run matches the published backbone and protocol."""
    note: str | None
    """Why not, when not shown."""
    backbone: str | None
    """The backbone."""
    source: str
    """Where the numbers come from."""
    rows: tuple[BaselineRow, ...] = field(metadata=NESTED)
    """Methods."""


@dataclass(frozen=True)
class Note:
    """One note of the report: a line of text with what it is about."""

    text: str
    """The line shown under the tables."""
    kind: str = "general"
    """``run`` (about one run), ``setting``, ``window``, ... (for filtering)."""
    arm: str | None = None
    """The arm it is about."""
    seed: int | None = None
    """The seed it is about."""
    file: str | None = None
    """A file it names."""
    line: int | None = None
    """A line of that file."""

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class CostArmRow:
    """What one arm's runs cost (:mod:`ccpo_lab.runs.cost`; hours are device-hours unless
    named wall)."""

    arm: str
    """Arm."""
    runs: int
    """Runs with a recorded cost."""
    completed: int
    """Of them, completed."""
    device: str | None
    """``GPU`` or ``CPU``."""
    devices: int | None
    """Devices one run holds (the largest)."""
    per_run: float | None
    """Device-hours of one run: the mean of the completed runs (none completed: the runs
    so far, each scaled to its final step): the cost the projections use."""
    per_run_projected: bool
    """``per_run`` is projected from runs not yet completed."""
    total: float | None
    """Device-hours spent by the arm's runs so far (every attempt)."""
    wall_hours: float | None
    """Mean wall time of a run, hours (every attempt)."""
    attempts: int
    """Attempts over the arm's runs (resumes and requeues add one each)."""
    startup: float | None
    """Mean wall hours per run in start-up and no timed phase."""
    rollout: float | None
    """Mean wall hours per run in rollouts."""
    update: float | None
    """Mean wall hours per run in updates (reference, advantages, policy update)."""
    evaluation: float | None
    """Mean wall hours per run in held-out evaluations."""
    checkpoint: float | None
    """Mean wall hours per run saving checkpoints."""
    peak_memory_gb: float | None
    """Largest peak memory of a run (GB)."""
    memory_kind: str | None
    """What it measures: ``GPU allocated`` (verl) or ``peak RSS`` (CPU)."""
    throughput: float | None
    """Mean throughput over the runs."""
    throughput_unit: str | None
    """Its unit: ``tokens/s/GPU`` (verl) or ``env steps/s`` (CPU)."""


@dataclass(frozen=True)
class MoreCostRow:
    """What a comparison's seeds-needed figure would cost at the observed cost per run."""

    arm: str
    """X."""
    reference: str
    """Y."""
    seeds_needed: int
    """Seeds per arm needed (the comparison's figure)."""
    more_arm: int
    """Seeds X still needs."""
    more_reference: int
    """Seeds Y still needs."""
    device_hours: float | None
    """Their device-hours (None: no cost per run known)."""


@dataclass(frozen=True)
class AdaptiveCostRow:
    """An adaptive design's device-hours against the fixed design of ``max_seeds`` seeds per
    arm it replaces, at the observed cost per run."""

    max_seeds: int
    """Seeds per arm of the fixed design."""
    runs: int
    """Runs the design used (its arms' seeds)."""
    fixed_runs: int
    """Runs of the fixed design."""
    device_hours: float | None
    """Device-hours the design's runs used."""
    fixed_device_hours: float | None
    """The fixed design's, at the observed cost per run of each arm."""
    saved: float | None
    """``fixed_device_hours - device_hours``."""
    saved_fraction: float | None
    """``saved / fixed_device_hours``."""
    finished: bool
    """Every comparison of the design is closed (else it may use more)."""


@dataclass(frozen=True)
class CostSection:
    """What the sweep cost, per arm and in total, and what more seeds would cost."""

    device: str
    """``GPU``, ``CPU`` (or both, ``GPU+CPU``)."""
    unit: str
    """``GPU-hours`` / ``CPU-hours``: the unit of every figure in hours."""
    total: float
    """Device-hours of the whole sweep so far."""
    runs: int
    """Runs with a recorded cost."""
    arms: tuple[CostArmRow, ...] = field(metadata=NESTED)
    """Per arm."""
    more: tuple[MoreCostRow, ...] = field(metadata=NESTED)
    """Per comparison with a seeds-needed figure."""
    adaptive: AdaptiveCostRow | None = field(default=None, metadata=NESTED)
    """The adaptive design against the fixed design (None: fixed seeds)."""
    price_per_device_hour: float | None = None
    """The price the runs were launched with (``launcher.price_per_device_hour``)."""
    currency: str | None = None
    """Its currency (``launcher.currency``)."""
    money: float | None = None
    """``total`` at that price."""


@dataclass(frozen=True)
class _SweepName:
    """The first field of the report document (before the settings)."""

    sweep: str
    """Sweep name."""


@dataclass(frozen=True, kw_only=True)
class ReportModel(ResolvedAnalysis, _SweepName):
    """The whole report (``ccpo-lab report --format json`` is :func:`to_plain` of it).

    Its fields: ``sweep``, the analysis settings used (:class:`~ccpo_lab.report.settings.
    ResolvedAnalysis`, in their declaration order), then the following.
    """

    settings_from: dict[str, str] = field(metadata=NESTED)
    """Where each setting came from."""
    bootstrap_min_seeds: int
    """Seeds from which a percentile bootstrap of a mean meets ``confidence``."""
    iqm_bootstrap_min_seeds: int
    """Seeds per task type from which the IQM's stratified bootstrap does."""
    arms: tuple[ArmRow, ...] = field(metadata=NESTED)
    """Arms in report order."""
    comparisons: tuple[ComparisonRow, ...] = field(metadata=NESTED)
    """Every arm but the reference against it."""
    baselines: Baselines = field(metadata=NESTED)
    """Published numbers or why not."""
    notes: tuple[Note, ...] = field(metadata=NESTED)
    """Notes on runs and settings."""
    adaptive: AdaptiveSection | None = field(default=None, metadata=NESTED)
    """The adaptive seed design and its looks (None: the sweep has fixed seeds)."""
    evaluation: EvaluationSection | None = field(default=None, metadata=NESTED)
    """The checkpoint evaluations (``ccpo-lab evaluate``) and where the uncertainty comes
    from (:mod:`ccpo_lab.report.evaluation`; None: no run has one)."""
    cost: CostSection | None = field(default=None, metadata=NESTED)
    """What the runs cost (None: no run recorded its cost, e.g. imported runs)."""

    @property
    def task_columns(self) -> tuple[str, ...]:
        """The per-task-type table's columns: the task types (the task-type table's, then
        any other a run logged), then ``All`` and ``Turns`` (the arms' ``per_task`` keys)."""
        return tuple(self.arms[0].per_task) if self.arms else ()

    def arm(self, name: str) -> ArmRow:
        """The row of arm ``name`` (KeyError if absent)."""
        for a in self.arms:
            if a.arm == name:
                return a
        raise KeyError(name)

    def comparison(self, name: str) -> ComparisonRow | None:
        """The comparison of arm ``name`` with the reference (None for the reference)."""
        return next((c for c in self.comparisons if c.arm == name), None)


def to_plain(obj: Any) -> Any:
    """A row or the document as JSON-ready values: dataclasses as dicts in field order,
    tuples as lists, mapping keys as strings, nan/inf as None."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_plain(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _scalar_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """Fields that hold one value or an interval (containers are JSON only)."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("csv", True)]


def csv_header(cls: type, prefix: str = "") -> list[str]:
    """CSV columns of a row type: its scalar fields, an interval as ``_low``/``_high``."""
    cols: list[str] = []
    for f in _scalar_fields(cls):
        if f.metadata.get("interval"):
            cols += [f"{prefix}{f.name}_low", f"{prefix}{f.name}_high"]
        else:
            cols.append(prefix + f.name)
    return cols


def csv_row(row: Any) -> list[Any]:
    """The values of :func:`csv_header` for one row (None for undefined)."""
    vals: list[Any] = []
    for f in _scalar_fields(type(row)):
        v = getattr(row, f.name)
        vals += list(v or NO_INTERVAL) if f.metadata.get("interval") else [v]
    return [None if isinstance(v, float) and not math.isfinite(v) else v for v in vals]
