"""The decision of one look: from the design, the looks so far and the completed scores.

Pure: no I/O, no clock, no randomness; the same state and scores give the same
:class:`~ccpo_lab.adaptive.state.Look`. The rule (:mod:`ccpo_lab.stats.sequential`):

1. Every comparison still open is tested on the completed seeds with the design's
   declared test (:func:`ccpo_lab.stats.compare_arms`: ``paired`` on common seeds,
   ``unpaired``: the two-sample t, Welch's t with ``n_x + n_y - 2`` df in the joint family).
2. The family (:mod:`ccpo_lab.adaptive.levels`): comparisons sharing one baseline
   (``family: joint``, the default) are tested with the joint max-|t| boundary of the
   ``r`` comparisons not yet rejected (:mod:`ccpo_lab.stats.joint`), stepped down as
   comparisons are rejected. Holm (``family: holm``, other baselines, or seeds off the
   planned schedule, e.g. after failed runs): each at ``alpha / r`` against its Lan-DeMets
   boundary (Maurer & Bretz 2013); a rejection raises the others' level (Holm controls
   the error on its own; a study that switches at a look is not covered by the joint
   calibration, which assumes the plan). Rejected: ``better`` / ``worse``.
3. Futility (non-binding), at looks before the last: the observed difference, taken as the
   truth, would reach less than the futility power at ``max_seeds`` seeds per arm:
   ``futile`` (seeds stop; the report says "unresolved, would need about N seeds").
4. At a comparison's last look (its arms reached ``max_seeds``): ``unresolved``.
5. Otherwise ``continue``: the next ``seeds_per_look`` seed labels (after the largest
   assigned) go to both arms of every continuing comparison.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import special

from ccpo_lab.adaptive.levels import is_joint, levels_table, statistic
from ccpo_lab.adaptive.pool import (
    ArmData,
    max_test_comparison,
    pooled_comparison,
    pooled_spread,
)
from ccpo_lab.adaptive.state import SEEDS_NEEDED_MAX, Action, AdaptiveState, Decision, Look
from ccpo_lab.config.design import AdaptiveDesign
from ccpo_lab.stats.compare import Comparison, compare_arms
from ccpo_lab.stats.joint import joint_df
from ccpo_lab.stats.sequential import (
    alpha_spent,
    calibrated_levels,
    futile,
    information,
    seeds_needed_at,
    step_down,
    t_boundary,
    t_test_power,
)
from ccpo_lab.stats.verdict import p_bound_text

__all__ = ["advance", "decide_look", "pending_seeds"]

Scores = Mapping[str, Mapping[int, float]]
"""arm -> seed -> the run's score (its converged-window mean); nan = the run finished
without a usable value (it counts as done, and is left out of the tests)."""


def pending_seeds(state: AdaptiveState, scores: Scores) -> dict[str, tuple[int, ...]]:
    """Assigned seeds without a score yet, per arm (only arms with some missing).

    The next look can be decided when this is empty.
    """
    out: dict[str, tuple[int, ...]] = {}
    for arm, seeds in state.assigned_seeds().items():
        have = scores.get(arm, {})
        missing = tuple(s for s in seeds if s not in have)
        if missing:
            out[arm] = missing
    return out


def advance(state: AdaptiveState, scores: Scores) -> AdaptiveState:
    """The state with the next look decided and appended (see :func:`decide_look`)."""
    return AdaptiveState(state.design, (*state.looks, decide_look(state, scores)))


@dataclass(frozen=True)
class _Open:
    """One open comparison's data at this look."""

    index: int
    cmp: Comparison
    se: float
    var_a: float
    var_b: float
    sizes: tuple[tuple[int, int], ...]  # per tested look, this one included when testable
    final: bool
    testable: bool
    rank: tuple[float, float] | None = None  # mean-or-rank: the ranks' t and its df

    @property
    def information(self) -> float:
        return float(information(self.sizes[-1:], self.cmp.test)[0]) if self.sizes else 0.0


def _size(test: str, n_x: int, n_y: int, n_pairs: int) -> tuple[int, int]:
    return (n_pairs, n_pairs) if test == "paired" else (n_x, n_y)


def _arm_values(
    arm: str, seeds: tuple[int, ...], scores: Scores
) -> tuple[np.ndarray, np.ndarray]:
    """(values, seed labels) of an arm's assigned seeds with a finite score."""
    have = scores.get(arm, {})
    keep = [s for s in seeds if s in have and np.isfinite(float(have[s]))]
    return (np.array([float(have[s]) for s in keep], dtype=np.float64),
            np.array(keep, dtype=np.int64))


def _spread(c: Comparison, x: np.ndarray, sx: np.ndarray, y: np.ndarray,
            sy: np.ndarray) -> tuple[float, float, float]:
    """(se, var_a, var_b) for the power figures: paired (se of the mean difference, its
    variance, 0); Welch (se, the two arms' variances)."""
    nan = float("nan")
    if c.test == "paired":
        _, ix, iy = np.intersect1d(sx, sy, assume_unique=True, return_indices=True)
        d = x[ix] - y[iy]
        v = float(np.var(d, ddof=1)) if d.size >= 2 else nan
        return float(np.sqrt(v / d.size)) if d.size >= 2 else nan, v, 0.0
    vx = float(np.var(x, ddof=1)) if x.size >= 2 else nan
    vy = float(np.var(y, ddof=1)) if y.size >= 2 else nan
    se = float(np.sqrt(vx / x.size + vy / y.size)) if x.size >= 2 and y.size >= 2 else nan
    return se, vx, vy


def _plan(sizes: tuple[tuple[int, int], ...], design: AdaptiveDesign) -> tuple[
        tuple[int, int], ...]:
    """``sizes`` followed by the planned looks after the last (``+seeds_per_look`` per arm,
    capped at ``max_seeds``)."""
    out = list(sizes)
    a, b = out[-1]
    cap = design.max_seeds
    while a < cap or b < cap:
        a, b = min(a + design.seeds_per_look, cap), min(b + design.seeds_per_look, cap)
        out.append((a, b))
    return tuple(out)


def _opt(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None


def decide_look(state: AdaptiveState, scores: Scores) -> Look:
    """Decide the next look of ``state`` from the completed per-seed scores.

    A comparison keeps the test of its first tested look (paired when its arms share
    at least two seeds then, as always when every arm runs the same seeds; Welch
    otherwise), so that its boundaries are calibrated for one test.

    Args:
        state: the design and the looks decided so far (never re-decided: their closed
            comparisons stay closed, their rejections keep their alpha recycled).
        scores: arm -> seed -> score of completed runs (see :data:`Scores`). Seeds not
            assigned by the design are ignored (the design owns the seed schedule).

    Returns:
        The new :class:`Look` (index ``len(state.looks) + 1``): a decision per open
        comparison and the seeds to add per arm (empty when finished).

    Raises:
        ValueError: the state is finished, or an assigned seed has no score yet
            (:func:`pending_seeds`), naming the arms and seeds.
    """
    design = state.design
    if state.finished:
        raise ValueError("the adaptive design is finished: no look is left to decide")
    missing = pending_seeds(state, scores)
    if missing:
        what = "; ".join(f"{a}: {list(s)}" for a, s in missing.items())
        raise ValueError(f"look {len(state.looks) + 1} is not ready: runs without a score: "
                         f"{what}")
    assigned = state.assigned_seeds()
    comps = design.comparisons
    last = state.last_decisions()
    rejected = np.array([c in last and last[c].action in ("better", "worse") for c in comps])
    opened = _open_comparisons(state, scores, assigned)
    joint = False
    if is_joint(design):
        data = {a: _arm_values(a, assigned[a], scores) for a in design.arms}
        pool = pooled_spread(data, design.comparisons, design.test == "paired")
        pooled = _open_comparisons(state, scores, assigned, (data, *pool))
        joint = _on_plan(pooled, design)
        if joint:
            opened = pooled
    nom_now, nom_final, p, testable = (_joint_levels(opened, design) if joint
                                       else _nominal_levels(opened, design))
    now, family = step_down(p, testable, rejected[None, :], nom_now)
    decisions: list[Decision] = []
    continuing: list[tuple[str, str]] = []
    for o in opened:
        open_now = int(len(comps) - rejected.sum() - now.sum())
        r = int(family[0, o.index]) if o.testable else open_now
        d = _decide_one(o, comps[o.index], design, r, joint, bool(now[0, o.index]),
                        nom_now[0, o.index, r - 1], nom_final[0, o.index, r - 1])
        if d.action == "continue":
            continuing.append(d.key)
        decisions.append(d)
    add = _seeds_to_add(design, assigned, continuing)
    used = {a: tuple(sorted(int(s) for s in _arm_values(a, assigned[a], scores)[1]))
            for a in design.arms}
    return Look(index=len(state.looks) + 1, seeds=used, decisions=tuple(decisions), add=add)


def _open_comparisons(state: AdaptiveState, scores: Scores,
                      assigned: Mapping[str, tuple[int, ...]],
                      pool: tuple[ArmData, float, float] | None = None) -> list[_Open]:
    """This look's test of every comparison not closed by an earlier look; ``pool``
    (the arms' data, the family's pooled variance and its df): the joint family's test,
    the pooled t (:mod:`ccpo_lab.adaptive.pool`) instead of the comparison's own with
    ``variance: pooled``, and the ranks' maximum test with ``mean-or-rank``."""
    design = state.design
    last = state.last_decisions()
    tested: dict[tuple[str, str], list[Decision]] = {c: [] for c in design.comparisons}
    for look in state.looks:
        for d in look.decisions:
            if d.p_value is not None:
                tested[d.key].append(d)
    opened: list[_Open] = []
    for i, key in enumerate(design.comparisons):
        if key in last and last[key].closed:
            continue
        arm, base = key
        x, sx = _arm_values(arm, assigned[arm], scores)
        y, sy = _arm_values(base, assigned[base], scores)
        past = tested[key]
        rank: tuple[float, float] | None = None
        # the declared test; paired falls back to Welch when the arms share < 2 seeds at
        # the first look, and a comparison keeps its first look's test
        welch = design.test == "unpaired" or (bool(past) and past[0].test == "welch")
        c = compare_arms(x, y) if welch else compare_arms(x, y, sx, sy)
        if pool is None:
            se, va, vb = _spread(c, x, sx, y, sy)
        elif design.variance == "pooled":
            c, se, va, vb = pooled_comparison(c, pool[0], key, pool[1], pool[2])
        else:  # the joint family on each comparison's own test
            se, va, vb = _spread(c, x, sx, y, sy)
        if pool is not None and statistic(design) == "mean-or-rank":
            c, t_r, df_r = max_test_comparison(c, pool[0], key,
                                               "own" if design.variance == "own" else "pooled")
            rank = (t_r, df_r)
        sizes = tuple(_size(d.test, d.n_x, d.n_y, d.n_pairs) for d in past)
        final = (len(assigned[arm]) >= design.max_seeds
                 or len(assigned[base]) >= design.max_seeds)
        testable = bool(np.isfinite(c.p_value))
        if testable:
            now_size = _size(c.test, c.n_x, c.n_y, c.n_pairs)
            grew = not sizes or (
                information((now_size,), c.test)[0] > information(sizes[-1:], c.test)[0])
            testable = grew
            if grew:
                sizes = (*sizes, now_size)
        opened.append(_Open(i, c, se, va, vb, sizes, final, testable, rank))
    return opened


def _nominal_levels(opened: list[_Open], design: AdaptiveDesign
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Nominal levels at this look and at the planned final look, per family size r.

    Returns ``(nom_now (1, m, m), nom_final (1, m, m), p (1, m), testable (1, m))`` for
    ``m`` comparisons; entry ``[0, i, r - 1]`` is comparison ``i``'s level in a family of
    ``r`` open hypotheses.
    """
    m = len(design.comparisons)
    alphas = [design.alpha / r for r in range(1, m + 1)]
    nom_now = np.zeros((1, m, m))
    nom_final = np.zeros((1, m, m))
    p = np.full((1, m), np.nan)
    testable = np.zeros((1, m), dtype=bool)
    for o in opened:
        if not o.testable:
            continue
        test = o.cmp.test
        # the planned schedule's levels: its last is the final look's; a look's level does
        # not depend on the looks planned after it, so look k's is this look's
        plan = calibrated_levels(_plan(o.sizes, design), design.max_seeds, alphas,
                                 design.spending, True, test)
        nom_final[0, o.index] = plan[:, -1]
        if o.final:  # spends the level in full, whatever its information
            nom_now[0, o.index] = calibrated_levels(
                o.sizes, design.max_seeds, alphas, design.spending, True, test)[:, -1]
        else:
            nom_now[0, o.index] = plan[:, len(o.sizes) - 1]
        p[0, o.index] = o.cmp.p_value
        testable[0, o.index] = True
    return nom_now, nom_final, p, testable


def _on_plan(opened: list[_Open], design: AdaptiveDesign) -> bool:
    """Whether the joint boundary applies at this look: a joint family whose every
    testable comparison has run the planned schedule (equal seeds in both arms, each
    look on plan) with the declared test."""
    if not is_joint(design):
        return False
    plan = design.planned_seeds()
    want = "paired" if design.test == "paired" else "welch"
    for o in opened:
        if o.cmp.test != want:
            return False
        if not o.testable:
            continue
        k = len(o.sizes)
        if (k > len(plan) or o.final != (k == len(plan))
                or o.sizes != tuple((n, n) for n in plan[:k])):
            return False
    return True


def _joint_levels(opened: list[_Open], design: AdaptiveDesign
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """As :func:`_nominal_levels`, from the joint table of the planned schedule."""
    m = len(design.comparisons)
    table = levels_table(design, design.planned_seeds(), design.test == "paired")
    nom_now = np.zeros((1, m, m))
    nom_final = np.zeros((1, m, m))
    p = np.full((1, m), np.nan)
    testable = np.zeros((1, m), dtype=bool)
    for o in opened:
        if o.testable:
            nom_now[0, o.index] = table[len(o.sizes) - 1]
            nom_final[0, o.index] = table[-1]
            p[0, o.index] = o.cmp.p_value
            testable[0, o.index] = True
    return nom_now, nom_final, p, testable


def _decide_one(o: _Open, key: tuple[str, str], design: AdaptiveDesign, r: int,
                joint: bool, rejected_now: bool, nom_now: float, nom_final: float
                ) -> Decision:
    """The decision of one open comparison in a family of ``r`` open hypotheses."""
    c = o.cmp
    level = design.alpha if joint else design.alpha / r
    power_df = (joint_df(design.max_seeds, "paired" if c.test == "paired" else "unpaired",
                         len(design.comparisons))
                if joint and design.variance == "pooled" else None)
    spent = nominal = bound = final_level = None
    needed: int | None = None
    if o.testable:
        nominal = float(nom_now)
        bound = _opt(float(t_boundary(nominal, c.df)))
        fraction = 1.0 if o.final else min(o.information / design.max_seeds, 1.0)
        spent = float(alpha_spent([fraction], level, design.spending)[0])
        final_level = float(nom_final)
        needed = seeds_needed_at(abs(c.diff), o.var_a, o.var_b, final_level, design.power,
                                 SEEDS_NEEDED_MAX)
    stat = _stat_text(c, nominal, bound, o.rank)
    action: Action
    if o.testable and rejected_now:
        action = "better" if c.diff > 0 else "worse"
        reason = (f"{stat}: rejected by the joint boundary of {r} open comparison(s) at "
                  f"family level {level:.3g} ({spent:.3g} spent)" if joint else
                  f"{stat}: rejected at level alpha/{r} = {level:.3g} ({spent:.3g} spent)")
    elif o.final:
        action = "unresolved"
        reason = (f"{stat} at the last look ({design.max_seeds} seeds per arm)"
                  if o.testable else _untested(c, last_look=True))
        reason += _needed_text(needed, design.max_seeds, c)
    elif o.testable and final_level is not None and design.futility and bool(futile(
            c.diff, o.se, c.df, o.var_a, o.var_b, design.max_seeds, final_level,
            design.power, design.futility_confidence, power_df)):
        action = "futile"
        q = float(special.stdtrit(c.df, design.futility_confidence))
        optimistic = abs(c.diff) + q * o.se
        pw = float(t_test_power(optimistic, o.var_a, o.var_b, design.max_seeds,
                                final_level, power_df))
        reason = (f"{stat}; even a difference of {optimistic:.3g} (the one-sided "
                  f"{design.futility_confidence:g} bound) has power {pw:.2f} < "
                  f"{design.power:g} at {design.max_seeds} seeds"
                  + _needed_text(needed, design.max_seeds, c))
    else:
        action = "continue"
        reason = stat if o.testable else _untested(c, last_look=False)
    return Decision(
        arm=key[0], baseline=key[1], action=action, reason=reason, test=c.test,
        n_x=c.n_x, n_y=c.n_y, n_pairs=c.n_pairs, information=o.information,
        diff=_opt(c.diff), t=_opt(c.t), df=_opt(c.df),
        p_value=_opt(c.p_value) if o.testable else None, level=level,
        alpha_spent=spent, nominal=nominal, boundary_t=bound, seeds_needed=needed,
        final=o.final)


def _seeds_to_add(
    design: AdaptiveDesign,
    assigned: Mapping[str, tuple[int, ...]],
    continuing: list[tuple[str, str]],
) -> dict[str, tuple[int, ...]]:
    """The same next labels for both arms of every continuing comparison, capped at max."""
    if not continuing:
        return {}
    start = max(max(s) for s in assigned.values()) + 1
    labels = tuple(range(start, start + design.seeds_per_look))
    need = {a for pair in continuing for a in pair}
    out: dict[str, tuple[int, ...]] = {}
    for a in design.arms:  # design order, for a deterministic record
        if a in need:
            room = design.max_seeds - len(assigned[a])
            if room > 0:
                out[a] = labels[:room]
    return out


def _stat_text(c: Comparison, nominal: float | None, bound: float | None,
               rank: tuple[float, float] | None = None) -> str:
    if not np.isfinite(c.p_value):
        return "no test possible"
    cmp = "<=" if nominal is not None and c.p_value <= nominal else ">"
    p, level = p_bound_text(c.p_value, float(nominal if nominal is not None else "nan"))
    text = f"{c.test} t = {c.t:.2f} (df {c.df:.3g})"
    if rank is not None:  # the maximum test: the p is the smaller of the two
        t_r = "undefined" if not np.isfinite(rank[0]) else f"{rank[0]:.2f} (df {rank[1]:.3g})"
        text += f", ranks' t = {t_r}, p (mean or rank) = {p} {cmp} {level}"
        return text
    text += f", p = {p} {cmp} {level}"
    if bound is not None:
        text += f" (|t| boundary {bound:.2f})"
    return text


def _untested(c: Comparison, last_look: bool) -> str:
    if not np.isfinite(c.p_value):
        why = "no test possible (fewer than 2 seeds, or no spread between seeds)"
    else:
        why = "no new completed seeds since the previous look"
    return why + (" at the last look" if last_look else "")


def _needed_text(needed: int | None, max_seeds: int, c: Comparison) -> str:
    if needed is not None:
        return f"; would need about {needed} seeds per arm (max {max_seeds})"
    if np.isfinite(c.diff) and c.diff != 0.0 and np.isfinite(c.p_value):
        return f"; would need more than {SEEDS_NEEDED_MAX} seeds per arm"
    return ""
