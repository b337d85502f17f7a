"""The report's tables, built once from the typed model, and their Markdown.

Each builder turns the :class:`~ccpo_lab.report.model.ReportModel` into a :class:`Table`
of formatted cells; Markdown (here) and LaTeX (:mod:`ccpo_lab.report.latex`) render the
same cells, so both show the same numbers (LaTeX sets a ``latex_note`` column, the
comparisons' seed correlations, as a note under its table). Success rates are shown in
percent; interim runs (``*``), comparisons whose step-1 identity was not verified
(``†``) and power figures with an assumed sd (``‡``) are marked. The CSV files and the
JSON hold the raw values (:mod:`ccpo_lab.report.export`).

To add a table: write a builder ``(model) -> Table`` and add it to :data:`TABLES`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ccpo_lab.launch.costline import money_text
from ccpo_lab.report.model import AdaptiveSection, ArmRow, ReportModel
from ccpo_lab.report.numbers import Pair, is_rate
from ccpo_lab.textout import fmt_hours

DASH = "—"
INTERIM_MARK = "*"
STEP1_MARK = "†"
ASSUMED_MARK = "‡"
TRAIN_MARK = " (train)"


@dataclass(frozen=True)
class Column:
    """A table column."""

    title: str
    """Header text (Unicode symbols; LaTeX maps them to math)."""
    align: str = "r"
    """``l`` or ``r``."""
    wrap: bool = False
    """LaTeX: a text column that may wrap (arm names)."""
    latex_note: bool = False
    """LaTeX: set as a note under the table (each row's value after its first cell)
    instead of a column, for a table with no width to spare in one column."""


@dataclass(frozen=True)
class Table:
    """A formatted table: cells are strings."""

    name: str
    """Identifier (``arms``, ``comparisons``, ``rise``, ``per_task``, ``per_seed``)."""
    title: str
    """One-line caption."""
    columns: tuple[Column, ...]
    """Columns."""
    rows: tuple[tuple[str, ...], ...]
    """Cells, one tuple per row."""
    notes: tuple[str, ...] = ()
    """Footnotes."""

    @property
    def header(self) -> list[str]:
        """Column titles."""
        return [c.title for c in self.columns]


def fmt(v: float | None, pct: bool, signed: bool = False) -> str:
    """A value for a table: rates in percent with one decimal, else two decimals."""
    if v is None:
        return DASH
    x = 100.0 * v if pct else v
    sign = "+" if signed else ""
    return f"{x:{sign}.1f}" if pct or abs(x) >= 100 else f"{x:{sign}.2f}"


def fmt_ci(ci: Pair | Sequence[float | None] | None, pct: bool) -> str:
    """``[lo, hi]``, or a dash when undefined."""
    if not ci or ci[0] is None or ci[1] is None:
        return DASH
    return f"[{fmt(ci[0], pct)}, {fmt(ci[1], pct)}]"


def fmt_p(p: float | None, alpha: float | None = None) -> str:
    """A p-value with three decimals, below 0.001 as ``<0.001``; with ``alpha``, with as
    many more decimals as it takes to read off it whether ``p < alpha``
    (:func:`ccpo_lab.stats.p_text`: 0.04956 at 0.05 is ``0.0496``)."""
    from ccpo_lab.stats import p_text

    if p is None:
        return DASH
    return p_text(p, alpha)


def fmt_p_bound(p: float | None, bound: float | None) -> tuple[str, str]:
    """A p-value and the boundary it is rejected at (``p <= bound``), printed so that the
    decision reads off them (:func:`ccpo_lab.stats.p_bound_text`)."""
    from ccpo_lab.stats import p_bound_text

    if p is None or bound is None:
        return fmt_p(p), _g(bound)
    return p_bound_text(p, bound)


def fmt_prob(v: float | None) -> str:
    """A probability with two decimals."""
    return DASH if v is None else f"{v:.2f}"


def fmt_ci_prob(ci: Pair) -> str:
    """``[lo, hi]`` of a probability, or a dash."""
    if ci[0] is None or ci[1] is None:
        return DASH
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def level(model: ReportModel) -> str:
    """The confidence level as text, e.g. ``95%``."""
    return f"{100 * model.confidence:g}%"


def z_value(confidence: float) -> float:
    """The two-sided normal quantile of a confidence level (1.96 at 95%)."""
    from scipy.special import ndtri

    return float(ndtri(0.5 + confidence / 2.0))


def _arm_name(arm: ArmRow) -> str:
    return arm.arm + (INTERIM_MARK if arm.interim else "")


def _interim_notes(arm: ArmRow) -> list[str]:
    out = []
    for k in arm.interim_seeds:
        e = arm.per_seed[k]
        total = e.total_steps if e.total_steps is not None else "?"
        if e.last_step is None:
            out.append(f"{arm.arm} seed {k} has logged nothing yet (of {total} steps)")
        else:
            out.append(f"{arm.arm} seed {k} at step {e.last_step} of {total}")
    return out


def _interim_note(model: ReportModel) -> list[str]:
    interim = [n for a in model.arms for n in _interim_notes(a)]
    return [f"{INTERIM_MARK} interim (not at the final step): " + "; ".join(interim)] \
        if interim else []


def _semantics_note(model: ReportModel) -> list[str]:
    """Which arms computed their estimator as run (docs/estimators.md, "Two semantics"),
    when any did."""
    as_run = [a.arm for a in model.arms if a.semantics == "as-run"]
    mixed = [a.arm for a in model.arms if a.semantics == "mixed"]
    if not as_run and not mixed:
        return []
    text = (f"semantics: {', '.join(as_run)} computed as run (what the published trainers "
            "computed on the padded, load-balanced batch they passed)" if as_run else "")
    if mixed:
        text += ("; " if text else "") + f"{', '.join(mixed)}: runs of both semantics"
    return [text + "; the other arms compute the method as described"]


def _unit(model: ReportModel) -> str:
    return " (%)" if is_rate(model.metric) else ""


def arms_table(model: ReportModel) -> Table:
    """Arm | mean | CI (t) | sd | seeds | IQM | turns, and bootstrap intervals where valid."""
    from ccpo_lab.stats import BRADLEY_LIBERAL, percentile_coverage

    pct = is_rate(model.metric)
    lv = level(model)
    show_boot = any(a.ci_bootstrap[0] is not None for a in model.arms)
    show_iqm_ci = any(a.ci_iqm[0] is not None for a in model.arms)
    columns = [Column("arm", "l", wrap=True), Column("mean"), Column(f"{lv} CI (t)"),
               Column("sd"), Column("seeds")]
    if show_boot:
        columns.append(Column(f"{lv} CI (bootstrap)"))
    columns.append(Column("IQM"))
    if show_iqm_ci:
        columns.append(Column(f"IQM {lv} CI"))
    columns.append(Column("turns"))
    rows, train_turns = [], False
    for a in model.arms:
        name = a.arm + (" (ref.)" if a.arm == model.reference else "")
        row = [name + (INTERIM_MARK if a.interim else ""), fmt(a.mean, pct),
               fmt_ci(a.ci_t, pct), fmt(a.sd, pct), str(a.n_seeds)]
        if show_boot:
            row.append(fmt_ci(a.ci_bootstrap, pct))
        row.append(DASH if a.iqm is None else fmt(a.iqm, True))
        if show_iqm_ci:
            row.append(fmt_ci(a.ci_iqm, True))
        turns = fmt(a.per_task["Turns"].mean, False)
        if a.turns_from_training and turns != DASH:
            turns += TRAIN_MARK
            train_turns = True
        rows.append((*row, turns))
    notes = [f"mean over seeds of each seed's converged-window mean (step ≥ "
             f"{model.window_start}); {lv} CI (t): Student t interval over seeds, the "
             "interval to cite; IQM: interquartile mean over seeds × the six task types "
             "(rliable)" + (", its CI a stratified bootstrap" if show_iqm_ci else "")
             + "; turns: mean held-out episode length"]
    if train_turns:
        notes.append(f"{TRAIN_MARK.strip()}: turns from training episodes "
                     "(episode/length/mean); held-out turns (val/length/mean) not logged")
    short = [a.n_seeds for a in model.arms if 2 <= a.n_seeds < model.bootstrap_min_seeds]
    if short:
        n = min(short)
        floor = 100 * (1 - BRADLEY_LIBERAL * (1 - model.confidence))
        notes.append(
            f"percentile-bootstrap intervals are shown from {model.bootstrap_min_seeds} seeds "
            f"(the IQM's, stratified over task types, from {model.iqm_bootstrap_min_seeds}): "
            f"with fewer, a {lv} percentile bootstrap covers less than {floor:g}% (about "
            f"{100 * percentile_coverage(n, model.confidence):.0f}% at {n} seeds)")
    notes += _semantics_note(model) + _interim_note(model)
    title = f"{model.metric}{_unit(model)} per arm, converged window step ≥ {model.window_start}"
    return Table("arms", title, tuple(columns), tuple(rows), tuple(notes))


def fmt_corr(r: float | None, ci: Pair) -> str:
    """A correlation with two decimals and its interval, ``0.93 [0.41, 0.99]`` (the value
    alone when it has no interval; a dash when undefined)."""
    if r is None:
        return DASH
    if ci[0] is None or ci[1] is None:
        return f"{r:.2f}"
    return f"{r:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def comparisons_table(model: ReportModel) -> Table:
    """Arm | Δ | CI | p | p (Holm) | P(X>Y) | seed corr. | seeds needed | verdict: one test
    per row."""
    pct = is_rate(model.metric)
    lv = level(model)
    ref = model.reference
    show_poi_ci = any(c.ci_prob_improvement[0] is not None for c in model.comparisons)
    columns = [Column("arm", "l", wrap=True), Column("Δ"), Column(f"{lv} CI"), Column("p"),
               Column("p (Holm)"), Column("P(X>Y)")]
    if show_poi_ci:
        columns.append(Column(f"P(X>Y) {lv} CI"))
    # LaTeX sets the correlations as a note: in one column the table has no width to spare
    columns += [Column("seed corr.", latex_note=True), Column("seeds needed"),
                Column("verdict", "l")]
    rows, unverified, assumed = [], [], False
    paired_arms = {c.reference for c in model.comparisons} - {ref} != set()
    for c in model.comparisons:
        arm = model.arm(c.arm)
        name = _arm_name(arm) + (f" vs {c.reference}" if paired_arms else "")
        if not c.step1_verified and c.n_x and c.n_y:  # (no window means: not step 1's)
            name += STEP1_MARK
            unverified.append(f"{c.arm}: {c.step1_detail}")
        if c.seeds_needed is not None:
            needed = str(c.seeds_needed)
        elif c.verdict == "unresolved" and "more than" in c.verdict_text:
            needed = ">1000"
        else:
            needed = DASH
        if c.power_sd_assumed:
            needed += ASSUMED_MARK
            assumed = True
        needed += _more_hours(model, c.arm, c.reference)
        row = [name, fmt(c.diff, pct, signed=True), fmt_ci(c.ci, pct), fmt_p(c.p, model.alpha),
               fmt_p(c.p_holm, model.alpha), fmt_prob(c.prob_improvement)]
        if show_poi_ci:
            row.append(fmt_ci_prob(c.ci_prob_improvement))
        row.append(fmt_corr(c.seed_correlation, c.ci_seed_correlation))
        rows += [tuple([*row, needed, c.verdict])]
    notes = _comparison_notes(model, paired_arms, show_poi_ci) + _correlation_notes(model)
    if unverified:
        notes.append(f"{STEP1_MARK} step-1 identity not verified: " + "; ".join(unverified))
    if assumed:
        notes.append(f"{ASSUMED_MARK} sd assumed: an arm with one seed has no sd across "
                     "seeds; the seeds-needed figure assumes it equals the within-run sd of "
                     "its evaluations (Welch)")
    notes += _design_note(model) + _interim_note(model)
    title = f"{model.metric}{_unit(model)}: each arm against " + (
        "its pair (analysis.pairs)" if paired_arms else ref)
    return Table("comparisons", title, tuple(columns), tuple(rows), tuple(notes))


def _comparison_notes(model: ReportModel, paired_arms: bool, show_poi_ci: bool) -> list[str]:
    """The comparisons table's notes: the test, the family, seeds needed, P(X>Y)."""
    ref, lv = model.reference, level(model)
    m = len(model.comparisons)
    one_baseline = len({c.reference for c in model.comparisons}) <= 1
    welch = [c.arm for c in model.comparisons if c.test == "welch"]
    test = "the paired t-test on the seeds both arms ran"
    if welch:
        test += (f" (Welch's t-test for {', '.join(welch)}: fewer than 2 common seeds"
                 + ("; its p is that of the larger evidence of Welch's t and the t of the "
                    "ranks, calibrated on null comparisons at its seeds" if one_baseline
                    else "") + ")")
    versus = "its pair (arm vs reference)" if paired_arms else ref
    family = "listed pair" if paired_arms else "comparison"
    rule = ("Holm's step-down at Šidák's levels: the rule of a group-sequential design "
            "with a single look" if one_baseline else "Holm's step-down (different baselines)")
    return [f"Δ = arm − {versus}{_unit(model)}; {lv} CI, p and seeds needed come from one "
            f"test per row: {test}",
            f"p (Holm): adjusted over the {m} {family}{'s' if m != 1 else ''}"
            f"{'' if paired_arms else f' with {ref}'} ({rule}); "
            f"better or worse only when p (Holm) < {model.alpha:g} with ≥ 2 seeds per arm, "
            "else unresolved",
            f"seeds needed: per arm for power {model.power:g} at the observed Δ with the "
            f"same test, two-sided, at α/{m} = {model.alpha / max(m, 1):.3g} (Colas et al. "
            "2018; paired: from the sd of the per-seed differences)" + _more_note(model),
            f"P(X>Y): probability that a seed of the arm beats a seed of {versus} "
            "(Mann–Whitney U / (n_x n_y))"
            + ("" if show_poi_ci else f"; its bootstrap interval is shown from "
               f"{model.bootstrap_min_seeds} seeds per arm")]


def _correlation_notes(model: ReportModel) -> list[str]:
    """What the seed corr. column is, then what each comparison's correlation (or its
    lack of spread) means for its test: the row's ``seed_correlation_note`` without the
    numbers the column shows, one line per meaning with the comparisons it holds for."""
    paired_arms = {c.reference for c in model.comparisons} - {model.reference} != set()
    versus = "its pair" if paired_arms else model.reference
    bare = any(c.seed_correlation is not None and c.ci_seed_correlation[0] is None
               for c in model.comparisons)
    out = [f"seed corr. = Pearson correlation of the arm's and {versus}'s window means "
           f"across their common seeds, with its {level(model)} Fisher-z interval from 4 common "
           f"seeds; {DASH} below 3 common seeds or when an arm has no spread across them"
           + ("; a value without an interval (3 common seeds) is no evidence of a shared "
              "seed effect" if bare else "")]
    by_meaning: dict[str, list[str]] = {}
    for c in model.comparisons:
        if c.seed_correlation_note:
            what, _, meaning = c.seed_correlation_note.partition(": ")
            by_meaning.setdefault(meaning or what, []).append(
                f"{c.arm} vs {c.reference}" if paired_arms else c.arm)
    return out + [f"seed corr. of {', '.join(names)}: {meaning}"
                  for meaning, names in by_meaning.items()]


def _design_note(model: ReportModel) -> list[str]:
    """The note on comparisons whose verdicts come from the adaptive design."""
    designed = [c.arm for c in model.comparisons if c.adaptive]
    if not designed:
        return []
    family = ("the joint step-down" if model.adaptive is not None
              and model.adaptive.family == "joint" else "Holm")
    return [f"verdicts of {', '.join(designed)}: decided by the adaptive design "
            f"(group-sequential boundaries, {family} across comparisons; see its "
            "tables), not by a fixed-sample test of all seeds, so no p (Holm); their seeds "
            "needed are at the design's last-look level"]


def _cell(mean: float | None, sd: float | None, pct: bool) -> str:
    if mean is None:
        return DASH
    if sd is None:
        return fmt(mean, pct)
    return f"{fmt(mean, pct)} ± {fmt(sd, pct)}"


def per_task_table(model: ReportModel) -> Table:
    """Arm | Pick | Look | Clean | Heat | Cool | Pick2 | All (mean ± sd over seeds)."""
    cols = [c for c in model.task_columns if c != "Turns"]
    rows = [(_arm_name(a), *(_cell(a.per_task[c].mean, a.per_task[c].sd, True) for c in cols))
            for a in model.arms]
    b = model.baselines
    notes = []
    if b.shown:
        for r in b.rows:
            rows.append((f"{r.method} (published, {b.backbone})",
                         *(fmt(r.per_task.get(c), True) for c in cols)))
        notes.append(f"published: {b.source}")
    elif b.note:
        notes.append(b.note)
    notes.append("success in %, mean ± sd over seeds of the converged-window means; All = "
                 "val/success_rate")
    columns = (Column("arm", "l", wrap=True), *(Column(c) for c in cols))
    return Table("per_task", f"per task type, converged window step ≥ {model.window_start}",
                 columns, tuple(rows), tuple(notes))


def per_seed_table(model: ReportModel) -> Table:
    """One row per run: window mean, sd, n, best evaluation and its bias, se, status."""
    pct = is_rate(model.metric)
    rows = []
    for a in model.arms:
        for k in a.seeds:
            e = a.per_seed[k]
            best = DASH if e.best is None else f"{fmt(e.best, pct)} ({e.best_step})"
            if e.error:
                status = "unreadable"
            elif e.total_steps is None:
                status = f"step {e.last_step} (final unknown)"
            elif e.interim:
                status = f"interim {e.last_step if e.last_step is not None else '-'}" \
                         f"/{e.total_steps}"
            else:
                status = "final"
            seed = str(k) if e.dir == f"seed-{k}" else f"{k} ({e.dir})"
            name = a.arm if k == a.seeds[0] else ""
            rows.append((name, seed, fmt(e.mean, pct), fmt(e.sd, pct), str(e.n_evals), best,
                         fmt(e.best_bias, pct, signed=True), fmt(e.binomial_se, pct), status))
    columns = (Column("arm", "l", wrap=True), Column("seed"), Column("mean"), Column("sd"),
               Column("n"), Column("best (step)"), Column("bias"), Column("se"),
               Column("status", "l"))
    notes = (f"mean, sd, n: of the evaluations in the converged window (step ≥ "
             f"{model.window_start}); best: the best of them, which overstates the run by "
             "about its bias (expected maximum of n normal draws × the sd); se: binomial "
             "standard error of one evaluation at the window mean",)
    return Table("per_seed", f"{model.metric}{_unit(model)} per seed", columns, tuple(rows),
                 notes)


def rise_table(model: ReportModel) -> Table:
    """Arm | first evaluation | window mean | rise ± z se | z | seeds that rose."""
    pct = is_rate(model.metric)
    z = z_value(model.confidence)
    rows = []
    for a in model.arms:
        r = a.rise
        steps = "/".join(map(str, r.start_steps)) or DASH
        first = DASH if r.start is None else f"{fmt(r.start, pct)} (step {steps})"
        rise = fmt(r.rise, pct, signed=True)
        if r.se is not None and r.rise is not None:
            rise += f" ± {fmt(z * r.se, pct)}"
        rows.append((_arm_name(a), first, fmt(r.window, pct), rise,
                     DASH if r.z is None else f"{r.z:.1f}",
                     f"{r.n_rose}/{r.n_seeds}" if r.n_seeds else DASH))
    columns = (Column("arm", "l", wrap=True), Column("first evaluation"), Column("window"),
               Column(f"rise ± {z:.2f} se"), Column("z"), Column("seeds that rose"))
    notes = (f"first evaluation (before training at step 0) and converged-window mean (step ≥ "
             f"{model.window_start}), means over the seeds that have both; se: the "
             f"evaluations' own binomial noise, so |z| > {z:.2f} means the policy's held-out "
             f"result changed beyond evaluation noise (at {level(model)}), not that the arm "
             "beats another" + ("" if pct else "; no se: the metric is not a success rate"),)
    return Table("rise", f"{model.metric}{_unit(model)}: converged window against the first "
                 "evaluation", columns, tuple(rows), notes)


def _g(v: float | None) -> str:
    """A level or probability with three significant digits, or a dash."""
    return DASH if v is None else f"{v:.3g}"


def adaptive_seeds_table(model: ReportModel) -> Table | None:
    """Arm | seeds at look 1 | look 2 | ...: the adaptive design's seeds per arm."""
    a = model.adaptive
    if a is None:
        return None
    n_done = len(a.seeds) - (0 if a.finished else 1)
    columns = [Column("arm", "l", wrap=True)]
    columns += [Column(f"look {k + 1}") for k in range(n_done)]
    if not a.finished:
        columns.append(Column(f"look {n_done + 1} (assigned)"))
    rows = tuple((arm, *(str(look.get(arm, 0)) for look in a.seeds)) for arm in a.arms)
    notes = (f"seeds per arm with a value at each look of the adaptive design: the listed "
             f"seeds first, then +{a.seeds_per_look} per look to the arms of open "
             f"comparisons, at most {a.max_seeds}; {a.spending} alpha spending "
             f"(Lan & DeMets 1983), {_family_text(a)}, alpha {a.alpha:g} over every look "
             "and comparison", *_spread_note(a))
    return Table("adaptive_seeds", "adaptive design: seeds per arm at each look",
                 tuple(columns), rows, notes)


def _family_text(a: AdaptiveSection) -> str:
    """How the design's family tests its comparisons, in words."""
    if a.family != "joint":
        return f"{a.test} tests, Holm across comparisons (Maurer & Bretz 2013)"
    stat = ("the smaller of the mean's p and 4 times the ranks' p"
            if a.statistic == "mean-or-rank" else "the mean's t")
    var = ("each comparison's own variance" if a.variance == "own"
           else "a variance pooled over the family")
    return (f"{a.test} tests, the joint max-statistic step-down across the comparisons "
            f"with one reference ({stat}; {var})")


def _spread_note(a: AdaptiveSection) -> tuple[str, ...]:
    """A note when the pooled variance's assumption looks strained: the sds across seeds
    at the last look differ 2-fold or more (information: the design was declared before
    the data, and a ratio from few seeds is noisy)."""
    lo, hi = a.spread
    if a.family != "joint" or a.variance != "pooled" or lo is None or hi is None:
        return ()
    if not (lo > 0 and hi / lo >= 2.0):
        return ()
    what = ("comparisons' per-seed differences" if a.test == "paired"
            else "arms' scores")
    return (f"the {what} vary {hi / lo:.1f}-fold across seeds (sd {lo:.3g} to "
            f"{hi:.3g}): the pooled variance assumes they vary alike; with one arm 2 or 3 "
            "times as variable its family-wise error measured 0.065 and 0.09-0.10 "
            "(docs/adaptive-seeds.md); a next study with such arms should declare "
            "variance: own",)


def adaptive_looks_table(model: ReportModel) -> Table | None:
    """Look | comparison | seeds | Δ | t (df) | p | α/r | nominal | |t| bound | decision:
    every decision of the design, with the boundary in force (the alpha spent by each
    look is in the CSV and JSON)."""
    a = model.adaptive
    if a is None:
        return None
    pct = is_rate(a.metric)
    rows, why = [], []
    for r in a.looks:
        t = DASH if r.t is None else f"{r.t:.2f} ({r.df:.3g})"
        bound = DASH if r.boundary_t is None else f"{r.boundary_t:.2f}"
        p, nominal = fmt_p_bound(r.p, r.nominal)
        rows.append((str(r.look), f"{r.arm} vs {r.baseline}", f"{r.n_x}/{r.n_y}",
                     fmt(r.diff, pct, signed=True), t, p, _g(r.level), nominal, bound,
                     r.action))
        if r.action in ("futile", "unresolved") or r.p is None:
            why.append(f"look {r.look}, {r.arm} vs {r.baseline}: {r.action}: {r.reason}")
    columns = (Column("look"), Column("comparison", "l", wrap=True), Column("seeds"),
               Column("Δ"), Column("t (df)"), Column("p"), Column("α/r"),
               Column("nominal"), Column("|t| bound"), Column("decision", "l"))
    notes = (f"Δ = arm − baseline{' (%)' if pct else ''} of {a.metric} over the seeds "
             f"with a value (seeds: arm/baseline); p: the look's t-test (paired by seed, "
             "else Welch), unadjusted; α/r: the comparison's Holm share of alpha with r "
             "comparisons not yet rejected; nominal: the boundary of α/r at this look "
             f"({a.spending} spending of α/r, calibrated for t-tests at these seeds): "
             "rejected (better or worse) when p ≤ nominal, i.e. |t| ≥ the bound; "
             "futile: even the one-sided "
             f"{a.futility_confidence:g} bound of Δ would need more than {a.max_seeds} "
             f"seeds per arm for power {a.power:g}", *why)
    return Table("adaptive_looks", f"adaptive design: decisions at each look ({a.metric}, "
                 f"window step ≥ {a.window_start})", columns, tuple(rows), notes)


def adaptive_verdicts_table(model: ReportModel) -> Table | None:
    """Comparison | verdict | look | seeds | p | α/r | nominal | |t| bound | seeds needed:
    each comparison's final decision with its adjusted threshold."""
    a = model.adaptive
    if a is None:
        return None
    rows = []
    for v in a.verdicts:
        bound = DASH if v.boundary_t is None else f"{v.boundary_t:.2f}"
        needed = DASH if v.seeds_needed is None else str(v.seeds_needed)
        p, nominal = fmt_p_bound(v.p, v.nominal)
        rows.append((f"{v.arm} vs {v.baseline}", v.verdict_text, str(v.look),
                     f"{v.n_x}/{v.n_y}", p, _g(v.level), nominal, bound, needed))
    columns = (Column("comparison", "l", wrap=True), Column("verdict", "l", wrap=True),
               Column("look"), Column("seeds"), Column("p"), Column("α/r"),
               Column("nominal"), Column("|t| bound"), Column("seeds needed"))
    state = "finished" if a.finished else "in progress (open comparisons: latest look)"
    notes = (f"the design is {state}; nominal: the adjusted threshold the p-value had to "
             "reach at that look (its Holm level α/r spent up to that look); seeds needed: "
             f"per arm for power {a.power:g} at the observed Δ, at the last look's nominal "
             "level (Colas et al. 2018, two-sided)",)
    return Table("adaptive_verdicts", "adaptive design: verdicts with their adjusted "
                 "thresholds", columns, tuple(rows), notes)


def _more_hours(model: ReportModel, arm: str, reference: str) -> str:
    """`` (+3.41 GPU-h)``: what a comparison's seeds needed would cost beyond the seeds
    run ('' when unknown or nothing more is needed); short, so the table keeps its width."""
    if model.cost is None:
        return ""
    m = next((m for m in model.cost.more if (m.arm, m.reference) == (arm, reference)), None)
    if m is None or m.device_hours is None or not (m.more_arm or m.more_reference):
        return ""
    return f" (+{fmt_hours(m.device_hours)} {model.cost.device}-h)"


def _more_note(model: ReportModel) -> str:
    """What ``(+N CPU-h)`` after a seeds-needed figure means ('' without costs)."""
    c = model.cost
    if c is None or not c.more:
        return ""
    return (f"; (+N {c.device}-h): about N more {c.unit} for the seeds beyond those run, at "
            "each arm's observed cost per run")


def _share(part: float | None, whole: float | None) -> str:
    if part is None or not whole:
        return DASH
    return f"{100 * part / whole:.0f}%"


def _hms(hours: float | None) -> str:
    """``h:mm:ss`` of a duration in hours, or a dash."""
    if hours is None:
        return DASH
    s = int(round(hours * 3600.0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _one(values: set[str | None]) -> str | None:
    """The single value of ``values`` (None values ignored), else None."""
    known = {v for v in values if v}
    return known.pop() if len(known) == 1 else None


def cost_table(model: ReportModel) -> Table | None:
    """Arm | runs | device-hours per run | total | wall per run | peak memory | throughput,
    and the sweep's total: what the study cost."""
    c = model.cost
    if c is None:
        return None
    u = c.unit
    mem_kind = _one({a.memory_kind for a in c.arms})
    rate_unit = _one({a.throughput_unit for a in c.arms})
    rows = [(a.arm + (INTERIM_MARK if a.per_run_projected else ""), str(a.runs),
             fmt_hours(a.per_run), fmt_hours(a.total), _hms(a.wall_hours),
             DASH if a.peak_memory_gb is None else f"{a.peak_memory_gb:.2f}",
             DASH if a.throughput is None else f"{a.throughput:,.3g}") for a in c.arms]
    rows.append(("all arms", str(c.runs), DASH, fmt_hours(c.total), DASH, DASH, DASH))
    columns = (Column("arm", "l", wrap=True), Column("runs"), Column(f"{u} per run"),
               Column(f"{u} total"), Column("wall per run"),
               Column(f"peak memory (GB{', ' + mem_kind if mem_kind else ''})"),
               Column(f"throughput{' (' + rate_unit + ')' if rate_unit else ''}"))
    notes = [f"{u}: devices held x wall time, summed over every attempt of a run (resumes "
             "and requeues included); per run: the mean of the arm's completed runs"
             + (f" ({INTERIM_MARK} none completed yet: projected from the runs so far to "
                "their final step)" if any(a.per_run_projected for a in c.arms) else ""),
             "peak memory: the largest over the arm's runs (GPU allocated on verl, the "
             "process's peak RSS on the CPU backend); throughput: mean over steps and runs "
             "(tokens/s/GPU on verl, environment steps/s on the CPU backend)"]
    if c.money is not None and c.price_per_device_hour is not None:
        notes.append(f"money: {money_text(c.money)} {c.currency} for the {fmt_hours(c.total)} "
                     f"{u} so far, at {c.price_per_device_hour:g} {c.currency} per "
                     "device-hour (launcher.price_per_device_hour, as the runs were "
                     "launched)")
    retried = [f"{a.arm} ({a.attempts} attempts for {a.runs} runs)" for a in c.arms
               if a.attempts > a.runs]
    if retried:
        notes.append("runs restarted: " + ", ".join(retried))
    return Table("cost", f"cost per arm ({u})", columns, tuple(rows), tuple(notes))


PHASE_COLUMNS = (("start-up", "startup"), ("rollout", "rollout"), ("update", "update"),
                 ("evaluation", "evaluation"), ("checkpoint", "checkpoint"))
"""Columns of the time-per-phase table, each with the field of
:class:`~ccpo_lab.report.model.CostArmRow` it shows."""


def cost_phases_table(model: ReportModel) -> Table | None:
    """Arm | wall per run | start-up | rollout | update | evaluation | checkpoint: where a
    run's wall time goes, as shares."""
    c = model.cost
    if c is None or all(a.rollout is None and a.update is None for a in c.arms):
        return None
    rows = [(a.arm, _hms(a.wall_hours),
             *(_share(getattr(a, f), a.wall_hours) for _, f in PHASE_COLUMNS))
            for a in c.arms]
    notes = ("share of a run's wall time (mean over the arm's runs) in each phase, as the "
             "trainer times it per step (timing_s/* in the metrics); start-up: everything "
             "in no timed phase (process and engine start, loading, the evaluation before "
             "training where the trainer does not time it, waiting, work redone after a "
             "restart)",)
    return Table("cost_phases", "time per phase", (
        Column("arm", "l", wrap=True), Column("wall per run"),
        *(Column(t) for t, _ in PHASE_COLUMNS)), tuple(rows), notes)


def more_cost_table(model: ReportModel) -> Table | None:
    """Comparison | seeds needed | more seeds | device-hours: what resolving each
    unresolved comparison would cost at the observed cost per run (and, for an adaptive
    design, its device-hours against the fixed design it replaces)."""
    c = model.cost
    if c is None or not (c.more or c.adaptive):
        return None
    u = c.unit
    rows = [(f"{m.arm} vs {m.reference}", str(m.seeds_needed),
             f"+{m.more_arm} / +{m.more_reference}", fmt_hours(m.device_hours))
            for m in c.more]
    notes = [f"seeds needed per arm (the comparisons' figure); more seeds: arm / reference "
             f"beyond those reported; {u}: those seeds at each arm's observed {u} per run"]
    a = c.adaptive
    if a is not None:
        rows.append((f"adaptive design (≤ {a.max_seeds} seeds per arm)", DASH,
                     f"{a.runs} runs used", fmt_hours(a.device_hours)))
        rows.append((f"the fixed design it replaces ({a.max_seeds} seeds per arm)", DASH,
                     f"{a.fixed_runs} runs", fmt_hours(a.fixed_device_hours)))
        saved = DASH if a.saved is None else (
            f"{fmt_hours(a.saved)} {u} ({100 * (a.saved_fraction or 0):.0f}%)")
        notes.append(f"adaptive design: {u} its looks used against the fixed design of "
                     f"{a.max_seeds} seeds per arm at the same observed cost per run; saved "
                     f"{saved}" + ("" if a.finished else " so far (the design is still "
                                                         "running: it may use more)"))
    return Table("cost_more", f"what more seeds would cost ({u})",
                 (Column("comparison", "l", wrap=True), Column("seeds needed"),
                  Column("more seeds"), Column(u)), tuple(rows), tuple(notes))


TABLES: tuple[Callable[[ReportModel], Table | None], ...] = (
    arms_table, comparisons_table, adaptive_verdicts_table, adaptive_looks_table,
    adaptive_seeds_table, rise_table, per_task_table, per_seed_table, cost_table,
    cost_phases_table, more_cost_table)
"""The report's tables, in order (a builder returns None when its table does not apply)."""


def tables(model: ReportModel) -> list[Table]:
    """Every table of the report that applies, in order (the checkpoint evaluations'
    last, built by their section: :mod:`ccpo_lab.report.evaluation_tables`)."""
    out = [t for build in TABLES if (t := build(model)) is not None]
    if model.evaluation is not None:
        out += model.evaluation.tables(model)
    return out


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def table_markdown(t: Table) -> list[str]:
    """A table's header, alignment and rows as Markdown lines."""
    return [_md_row(t.header),
            "|" + "".join("--:|" if c.align == "r" else ":--|" for c in t.columns),
            *(_md_row(row) for row in t.rows)]


def to_markdown(model: ReportModel, figures: Sequence[tuple[str, str]] = ()) -> str:
    """Every table with its notes, the report's notes, and (``figures``: (file, what it
    shows)) the list of figures, as Markdown."""
    out = [f"# Report: {model.sweep}", ""]
    for t in tables(model):
        out += [f"## {t.title}", "", *table_markdown(t), ""]
        out += [f"- {n}" for n in t.notes] + [""]
    if model.notes:
        out += ["## Notes", ""] + [f"- {n.text}" for n in model.notes] + [""]
    if figures:
        out += ["## Figures", ""] + [f"- `{name}`: {what}" for name, what in figures] + [""]
    return "\n".join(out)
