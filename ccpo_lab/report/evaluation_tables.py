"""The checkpoint evaluations' tables (:mod:`ccpo_lab.report.evaluation`), as the report's
other tables: :class:`~ccpo_lab.report.tables.Table` of formatted cells that Markdown and
LaTeX render alike. Success rates in percent; variances in squared percentage points
(pp², a rate's variance x 10,000), half-widths in points.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ccpo_lab.report.model import ReportModel
from ccpo_lab.report.tables import DASH, Column, Table, fmt, fmt_ci, fmt_p, level

if TYPE_CHECKING:
    from ccpo_lab.report.evaluation import EvalGroup, EvaluationSection, VarianceRow

SPLIT_NAMES = {"in": "in distribution (held-out games)",
               "out": "out of distribution"}
ADVICE = {"seeds": "more seeds", "episodes": "more episodes", "either": "either",
          "unknown": DASH}


def _pp2(v: float | None) -> str:
    return DASH if v is None else f"{1e4 * v:.1f}"


def group_table(model: ReportModel, g: EvalGroup, index: int) -> Table:
    """Arm | seeds | mean | CI | training-time | Δ vs ref | CI | p | p (Holm) | verdict."""
    lv = level(model)
    ref = g.comparisons[0].reference if g.comparisons else model.reference
    comp = {c.arm: c for c in g.comparisons}
    rows = []
    for a in g.arms:
        c = comp.get(a.arm)
        name = a.arm + (" (ref.)" if a.arm == ref else "")
        rows.append((name, str(a.n_seeds), fmt(a.mean, True), fmt_ci(a.ci_t, True),
                     fmt(a.training, True),
                     DASH if c is None else fmt(c.diff, True, signed=True),
                     DASH if c is None else fmt_ci(c.ci, True),
                     DASH if c is None else fmt_p(c.p), DASH if c is None else fmt_p(c.p_holm),
                     DASH if c is None else c.verdict, fmt(a.turns, False)))
    columns = (Column("arm", "l", wrap=True), Column("seeds"), Column("mean"),
               Column(f"{lv} CI (t)"), Column("training-time"), Column("Δ"),
               Column(f"Δ {lv} CI"), Column("p"), Column("p (Holm)"),
               Column("verdict", "l"), Column("turns"))
    m = len(g.comparisons)
    notes = [f"{g.games} games x {g.repeats} repeat(s) per seed at temperature "
             f"{g.temperature:g}, the same draw for every run (draw {g.draw_id[:8]}: the same "
             "games in the same order, the same sampling seed per seed, game and repeat); "
             "mean: over seeds of each seed's success on its episodes, with its t interval; "
             "training-time: the same seeds' training-time evaluation at the checkpoint's "
             "step",
             f"Δ = arm − {ref} paired by seed (t interval, p); p (Holm) over the {m} "
             f"comparison{'s' if m != 1 else ''} of this table; better or worse only when "
             f"p (Holm) < {model.alpha:g} with ≥ 2 seeds per arm"]
    notes += list(g.left_out)
    title = (f"checkpoint evaluation {index}: the {g.checkpoint} checkpoint, "
             f"{SPLIT_NAMES.get(g.split, g.split)}, success (%)")
    return Table(f"eval_{index}", title, columns, tuple(rows), tuple(notes))


def reference_table(model: ReportModel, g: EvalGroup, index: int) -> Table | None:
    """Policy | seeds | mean or Δ | CI | p | p (Holm) | verdict: the reference policies of
    a checkpoint evaluation and every arm against each, paired by game."""
    if not g.references:
        return None
    lv = level(model)
    rows = []
    for r in g.references:
        rows.append((f"{r.reference} (reference)", str(r.n_seeds), fmt(r.mean, True),
                     fmt_ci(r.ci, True), DASH, DASH, DASH))
        for c in (c for c in g.reference_comparisons if c.reference == r.reference):
            rows.append((f"{c.arm} − {c.reference}", str(c.n_seeds),
                         fmt(c.diff, True, signed=True), fmt_ci(c.ci, True), fmt_p(c.p),
                         fmt_p(c.p_holm), c.verdict))
    columns = (Column("policy", "l", wrap=True), Column("seeds"), Column("mean / Δ"),
               Column(f"{lv} CI (t)"), Column("p"), Column("p (Holm)"),
               Column("verdict", "l"))
    m = len(g.reference_comparisons)
    methods = sorted({c.method for c in g.reference_comparisons})
    notes = [f"reference policies (ccpo-lab evaluate --reference) on the same draw as "
             f"checkpoint evaluation {index}: the same {g.games} games x {g.repeats} "
             "repeat(s), played on each seed's sampling stream (the same random numbers as "
             "that seed's checkpoint, game by game); seeds: the streams played",
             "Δ = arm − reference over seeds x games, paired by game and stream; its "
             "interval counts both the arm's seed spread and the games (two-way random "
             "model: (MS_seeds + max(MS_games − MS_interaction, 0)) / (seeds x games), t "
             f"with seeds − 1 degrees of freedom); p (Holm) over the {m} comparison"
             f"{'s' if m != 1 else ''} of this table; better or worse only when p (Holm) < "
             f"{model.alpha:g} with ≥ 2 seeds" + (f"; variance: {', '.join(methods)}"
                                                  if methods else "")]
    title = (f"checkpoint evaluation {index} against reference policies: the "
             f"{g.checkpoint} checkpoint, {SPLIT_NAMES.get(g.split, g.split)}, success (%)")
    return Table(f"eval_{index}_references", title, columns, tuple(rows), tuple(notes))


def selection_table(model: ReportModel, ev: EvaluationSection) -> Table | None:
    """Arm | seeds | training-time score | re-score | bias [CI]: the best checkpoint."""
    if not ev.selection:
        return None
    lv = level(model)
    rows = tuple((r.arm, str(r.n_seeds), fmt(r.training, True), fmt(r.rescore, True),
                  fmt(r.bias, True, signed=True), fmt_ci(r.ci, True)) for r in ev.selection)
    columns = (Column("arm", "l", wrap=True), Column("seeds"), Column("training-time"),
               Column("re-score"), Column("bias"), Column(f"bias {lv} CI"))
    notes = ("the best checkpoint of each seed is the one whose training-time held-out "
             "evaluation was the highest (what selected it); re-scored in distribution on "
             "the common draw, the difference is the selection bias measured, paired by "
             "seed (the per-seed table's bias column is its estimate from the window's "
             "spread)",)
    return Table("eval_selection", "the best checkpoint: training-time score against its "
                 "re-score, success (%)", columns, rows, notes)


def _what(r: VarianceRow) -> str:
    return r.arm if r.reference is None else f"{r.arm} − {r.reference}"


def _share(r: VarianceRow) -> str:
    if r.episode is None:
        return DASH
    share = "" if r.episode_share is None else f" ({100 * r.episode_share:.0f}%)"
    return _pp2(r.episode) + share


def variance_table(model: ReportModel, ev: EvaluationSection) -> Table | None:
    """Evaluation | arm | seeds | var | seed part | episode part | ± now | ± +1 seed |
    ± 2x episodes | buy."""
    rows_in = [r for g in ev.groups for r in g.variance] + list(ev.window)
    if not rows_in:
        return None
    rows = []
    last = None
    for r in rows_in:
        head = r.evaluation if r.evaluation != last else ""
        last = r.evaluation
        mark = "*" if r.truncated else ""
        rows.append((head, _what(r), str(r.n_seeds), _pp2(r.var_means), _pp2(r.seed) + mark,
                     _share(r), fmt(r.halfwidth, True), fmt(r.halfwidth_more_seed, True),
                     fmt(r.halfwidth_more_episodes, True), ADVICE.get(r.advice, r.advice)))
    columns = (Column("evaluation", "l", wrap=True), Column("arm", "l", wrap=True),
               Column("seeds"), Column("var"), Column("seed part"), Column("episode part"),
               Column("± now"), Column("± +1 seed"), Column("± 2× episodes"),
               Column("buy", "l"))
    lv = level(model)
    notes = ("var: variance of the per-seed means (pp²); seed part + episode part = var in "
             "expectation (ANOVA estimators of variance components, Searle, Casella & "
             "McCulloch 1992: re-scores as seeds × games crossed, repeats within, so the "
             "games' difficulty, common to every seed, is not counted as noise; the "
             "training window as evaluations nested in seeds, its episode part the "
             "evaluations' binomial noise, the rest of the within-run spread the policy's "
             "drift between evaluations); a comparison's row decomposes the game-level "
             "paired differences (by seed, game and repeat)",
             f"± now: the {lv} t half-width of the mean (points); ± +1 seed: expected with "
             "one more seed; ± 2× episodes: expected with twice the episodes per seed (new "
             "games, so the episode part halves); buy: the narrower of the two; * a "
             "component estimate was negative and set to 0",)
    return Table("eval_variance", "where the uncertainty comes from: seeds or episodes",
                 columns, tuple(rows), notes)


def evaluation_tables(model: ReportModel, ev: EvaluationSection) -> list[Table]:
    """Every table of the section, in order."""
    out = []
    for i, g in enumerate(ev.groups):
        out.append(group_table(model, g, i + 1))
        refs = reference_table(model, g, i + 1)
        if refs is not None:
            out.append(refs)
    out += [t for t in (selection_table(model, ev), variance_table(model, ev))
            if t is not None]
    return out
