"""The report across environments: does each comparison's conclusion hold on every one?

A sweep over several environments is reported per environment (everything a report
shows, each from its own directory), then here: for each comparison with the reference
found on every environment, its difference, interval and verdict per environment side by
side, whether the directions agree, and the arm x environment interaction
(:mod:`ccpo_lab.stats.across`, paired by seed where every environment ran the same
seeds), Holm-adjusted over the comparisons. The one-line verdict:

* ``holds``: the same resolved verdict (better, or worse) on every environment, and no
  interaction shown;
* ``differs``: the interaction is significant (Holm): the advantage is not the same on
  every environment (whatever the per-environment verdicts);
* ``unresolved``: anything else: a verdict unresolved somewhere, or resolved verdicts that
  disagree without a significant interaction. The data do not say whether the conclusion
  carries over.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ccpo_lab.stats.across import (
    Interaction,
    environment_difference,
    independent_interaction,
    paired_interaction,
)
from ccpo_lab.stats.compare import holm

if TYPE_CHECKING:
    from ccpo_lab.report.model import ComparisonRow, ReportModel

__all__ = ["AcrossSection", "CrossRow", "EnvCell", "across_section"]


@dataclass(frozen=True)
class EnvCell:
    """One comparison on one environment (its report's comparison row)."""

    environment: str
    diff: float | None
    ci: tuple[float | None, float | None]
    p_holm: float | None
    verdict: str
    """``better``, ``worse``, ``unresolved`` (that environment's report), ``absent``."""
    n_seeds: int


@dataclass(frozen=True)
class CrossRow:
    """One comparison across the environments."""

    arm: str
    reference: str
    cells: tuple[EnvCell, ...]
    directions: str
    """``agree`` (every difference of one sign), ``disagree``, or ``-`` (one missing)."""
    interaction: Interaction | None
    """None: not testable (too few seeds, no spread)."""
    paired: bool
    """The interaction is paired by seed (every environment ran the same seeds)."""
    p_holm: float | None
    verdict: str
    """``holds``, ``differs`` or ``unresolved`` (module docstring)."""
    reason: str


@dataclass(frozen=True)
class AcrossSection:
    """The cross-environment section."""

    environments: tuple[str, ...]
    metric: str
    confidence: float
    alpha: float
    rows: tuple[CrossRow, ...]
    notes: tuple[str, ...]


def across_section(models: Mapping[str, ReportModel]) -> AcrossSection:
    """The section from each environment's report model (``{environment: model}``, in
    the sweep's order); its settings are the first model's."""
    envs = tuple(models)
    first = next(iter(models.values()))
    notes = [f"{e}: its reference is {m.reference}, not {first.reference}; its comparisons "
             "are left out" for e, m in models.items() if m.reference != first.reference]
    same = {e: m for e, m in models.items() if m.reference == first.reference}
    arms = [c.arm for c in first.comparisons if c.reference == first.reference]
    drafts = [_draft(arm, first.reference, same, envs, first.confidence) for arm in arms]
    adjusted = holm(np.array([math.nan if d[1] is None else d[1].p for d in drafts]))
    rows = tuple(_row(cells, it, paired, arm, first.reference, p, first.alpha)
                 for (cells, it, paired), arm, p in zip(
                     drafts, arms, (None if math.isnan(x) else float(x) for x in adjusted),
                     strict=True))
    return AcrossSection(envs, first.metric, first.confidence, first.alpha, rows, tuple(notes))


def _comparison(model: ReportModel, arm: str, reference: str) -> ComparisonRow | None:
    for c in model.comparisons:
        if c.arm == arm and c.reference == reference:
            return c
    return None


def _draft(arm: str, reference: str, models: Mapping[str, ReportModel],
           envs: Sequence[str], confidence: float
           ) -> tuple[tuple[EnvCell, ...], Interaction | None, bool]:
    """The cells of one comparison and its interaction test (not yet adjusted)."""
    cells = []
    for env in envs:
        c = _comparison(models[env], arm, reference) if env in models else None
        cells.append(EnvCell(env, None, (None, None), None, "absent", 0) if c is None else
                     EnvCell(env, c.diff, c.ci, c.p_holm, c.verdict,
                             c.n_pairs if c.paired else min(c.n_x, c.n_y)))
    if any(c.verdict == "absent" for c in cells):
        return tuple(cells), None, False
    scores = [_scores(models[e], arm, reference) for e in envs]
    return (tuple(cells), *_interaction(scores, [_comparison(models[e], arm, reference)
                                                 for e in envs], confidence))


def _scores(model: ReportModel, arm: str, reference: str
            ) -> tuple[dict[int, float], dict[int, float]]:
    """Per-seed window means of the arm and of the reference on one environment."""
    def of(name: str) -> dict[int, float]:
        row = model.arm(name)
        return {s: r.mean for s, r in row.per_seed.items() if r.mean is not None
                and math.isfinite(r.mean)}
    return of(arm), of(reference)


def _interaction(scores: list[tuple[dict[int, float], dict[int, float]]],
                 rows: Sequence[ComparisonRow | None], confidence: float
                 ) -> tuple[Interaction | None, bool]:
    """Paired by seed when every environment has the same seeds for both arms (2+),
    else each environment's difference on its own; None when not testable."""
    seed_sets = [set(x) & set(y) for x, y in scores]
    shared = seed_sets[0] if all(s == seed_sets[0] for s in seed_sets) else set()
    every = all(set(x) == set(y) == shared for x, y in scores)
    if every and len(shared) >= 2:
        seeds = sorted(shared)
        d = np.array([[x[s] - y[s] for x, y in scores] for s in seeds])
        if np.ptp(d, axis=0).sum() == 0 and np.ptp(d[:, :-1] - d[:, 1:]) == 0:
            return None, True
        return paired_interaction(d, confidence), True
    parts = []
    for (x, y), row in zip(scores, rows, strict=True):
        paired = bool(row is not None and row.paired)
        keys = sorted(set(x) & set(y)) if paired else None
        xs = [x[s] for s in keys] if keys is not None else list(x.values())
        ys = [y[s] for s in keys] if keys is not None else list(y.values())
        if len(xs) < 2 or len(ys) < 2:
            return None, False
        parts.append(environment_difference(xs, ys, paired))
    if any(v <= 0 for _, v, _ in parts):
        return None, False
    n = min(len(x) for x, _ in scores)
    diffs, variances, dfs = zip(*parts, strict=True)
    return independent_interaction(diffs, variances, dfs, n, confidence), False


def _row(cells: tuple[EnvCell, ...], it: Interaction | None, paired: bool, arm: str,
         reference: str, p_holm: float | None, alpha: float) -> CrossRow:
    """The row with its directions and verdict."""
    diffs = [c.diff for c in cells]
    directions = "-" if any(d is None for d in diffs) else (
        "agree" if len({math.copysign(1.0, d) for d in diffs if d is not None}) == 1
        and all(d != 0 for d in diffs if d is not None) else "disagree")
    verdicts = {c.verdict for c in cells}
    if p_holm is not None and p_holm < alpha:
        verdict, reason = "differs", (f"the interaction is significant (p_holm {p_holm:.3g} "
                                      f"< {alpha:g}): the advantage is not the same on every "
                                      "environment")
    elif len(verdicts) == 1 and verdicts <= {"better", "worse"}:
        verdict, reason = "holds", (f"{next(iter(verdicts))} on every environment, no "
                                    "interaction shown")
    else:
        per = ", ".join(f"{c.verdict} on {c.environment}" for c in cells)
        verdict, reason = "unresolved", per + ("" if it is None else
                                               "; no interaction shown either")
    return CrossRow(arm, reference, cells, directions, it, paired, p_holm, verdict, reason)
