"""The report's view of an adaptive seed design: its looks, and the verdicts it decided.

:func:`adaptive_section` reads ``<sweep>/adaptive.json`` (:mod:`ccpo_lab.adaptive.store`)
into an :class:`~ccpo_lab.report.model.AdaptiveSection`: the seeds per arm at each look,
every decision with its test, the boundary in force (level: alpha / r with Holm, alpha
with the joint family; alpha spent, nominal level, |t|) and why, and each comparison's
latest decision. :func:`apply_design` makes the main comparisons table take the design's
verdicts for the comparisons it decides (not those of a naive fixed-sample re-test of all
seeds, which ignores the looks), when the report reads the metric and window the design
decided on.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ccpo_lab.report.model import (
    AdaptiveLookRow,
    AdaptiveSection,
    AdaptiveVerdictRow,
    ComparisonRow,
    Note,
)
from ccpo_lab.report.numbers import NO_INTERVAL, Pair
from ccpo_lab.report.settings import ReportSettings
from ccpo_lab.runs.layout import SweepDir

if TYPE_CHECKING:
    from ccpo_lab.config.design import AdaptiveDesign


def adaptive_section(sweep_dir: str | Path) -> AdaptiveSection | None:
    """The design of the sweep in ``sweep_dir`` (None when it has fixed seeds).

    Raises:
        UserError: the state file exists and cannot be read (the report refuses rather
            than show verdicts that ignore the design).
    """
    from ccpo_lab.adaptive.levels import is_joint
    from ccpo_lab.adaptive.store import read_record

    record = read_record(SweepDir(Path(sweep_dir)))
    if record is None:
        return None
    state, design = record.state, record.state.design
    looks = tuple(
        AdaptiveLookRow(
            look=look.index, arm=d.arm, baseline=d.baseline, n_x=d.n_x, n_y=d.n_y,
            test=d.test, diff=d.diff, t=d.t, df=d.df, p=d.p_value, level=d.level,
            alpha_spent=d.alpha_spent, nominal=d.nominal, boundary_t=d.boundary_t,
            action=d.action, seeds_needed=d.seeds_needed, reason=d.reason)
        for look in state.looks for d in look.decisions)
    at = {d.key: look.index for look in state.looks for d in look.decisions}
    verdicts = tuple(
        AdaptiveVerdictRow(
            arm=d.arm, baseline=d.baseline, verdict=d.verdict, verdict_text=d.verdict_text(),
            closed=d.closed, look=at[key], n_x=d.n_x, n_y=d.n_y, p=d.p_value, level=d.level,
            nominal=d.nominal, boundary_t=d.boundary_t, seeds_needed=d.seeds_needed,
            reason=d.reason)
        for key, d in state.last_decisions().items())
    seeds = [{a: len(look.seeds.get(a, ())) for a in design.arms} for look in state.looks]

    if not state.finished:
        assigned = state.assigned_seeds()
        seeds.append({a: len(assigned[a]) for a in design.arms})
    return AdaptiveSection(
        max_seeds=design.max_seeds, seeds_per_look=design.seeds_per_look, alpha=design.alpha,
        power=design.power, spending=design.spending, futility=design.futility,
        futility_confidence=design.futility_confidence, metric=record.metric,
        window_start=record.window_start, finished=state.finished, arms=design.arms,
        seeds=tuple(seeds), looks=looks, verdicts=verdicts, test=design.test,
        family="joint" if is_joint(design) else "holm",
        statistic=design.statistic or "mean", variance=design.variance,
        spread=_spread(record.inputs[-1] if record.inputs else {}, design))


def _spread(scores: Mapping[str, Mapping[int, float]], design: AdaptiveDesign) -> Pair:
    """(smallest, largest) sd across seeds: of each arm's scores (unpaired) or of each
    comparison's differences on its common seeds (paired); None below 2 values."""
    import numpy as np

    def sd(v: list[float]) -> float | None:
        a = np.array([x for x in v if math.isfinite(x)])
        return float(np.std(a, ddof=1)) if a.size >= 2 else None

    if design.test == "paired":
        sds = [sd([scores.get(a, {})[k] - scores.get(b, {})[k]
                   for k in set(scores.get(a, {})) & set(scores.get(b, {}))])
               for a, b in design.comparisons]
    else:
        sds = [sd(list(scores.get(a, {}).values())) for a in design.arms]
    got = [s for s in sds if s is not None]
    return (min(got), max(got)) if len(got) >= 2 else NO_INTERVAL


def apply_design(rows: Sequence[ComparisonRow], section: AdaptiveSection | None,
                 s: ReportSettings) -> tuple[tuple[ComparisonRow, ...], list[Note]]:
    """The comparison rows with the design's verdicts where it decides them, and notes.

    A row takes the design's verdict, verdict text, seeds needed and reason (and drops
    its fixed-sample Holm p) when the design compares the same arm with the same
    reference on the metric and window this report reads; otherwise a note says why not.
    """
    if section is None:
        return tuple(rows), []
    if (section.metric, section.window_start) != (s.metric, s.window_start):
        return tuple(rows), [Note(
            f"the adaptive design decided on {section.metric} (window step >= "
            f"{section.window_start}); this report reads {s.metric} (window step >= "
            f"{s.window_start}): its verdicts are this report's fixed-sample tests, the "
            "design's are in the adaptive tables", kind="adaptive")]
    by_key = {(v.arm, v.baseline): v for v in section.verdicts}
    out, used = [], []
    for row in rows:
        v = by_key.get((row.arm, row.reference))
        if v is None:
            out.append(row)
            continue
        used.append(row.arm)
        out.append(dataclasses.replace(
            row, verdict=v.verdict, verdict_text=v.verdict_text, seeds_needed=v.seeds_needed,
            reason=f"adaptive design, look {v.look}: {v.reason}", p_holm=None, adaptive=True))
    notes = []
    if s.alpha != section.alpha and used:
        notes.append(Note(f"the adaptive design's verdicts are at its alpha {section.alpha:g}, "
                          f"not this report's {s.alpha:g}", kind="adaptive"))
    if not section.finished:
        notes.append(Note("the adaptive design is not finished: comparisons still open are "
                          "'continuing (look in progress)'; run the sweep command again once "
                          "the look's runs are complete", kind="adaptive"))
    return tuple(out), notes
