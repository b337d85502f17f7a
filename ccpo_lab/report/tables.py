"""The report's tables (main, per task type, per seed) as Markdown, LaTeX and CSV.

Everything is rendered from the report document (:attr:`Report.data`). Markdown and
LaTeX show success rates in percent and mark interim runs and comparisons whose step-1
identity was not verified; CSV holds the raw values in the metric's units.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ccpo_lab.report.analysis import TASK_COLUMNS, is_rate

DASH = "—"
INTERIM_MARK = "*"
STEP1_MARK = "†"


@dataclass(frozen=True)
class Table:
    """A formatted table: cells are strings."""

    name: str
    """File stem (``main``, ``per_task``, ``per_seed``)."""
    title: str
    """One-line caption."""
    header: list[str]
    """Column names."""
    rows: list[list[str]]
    """Cells."""
    notes: list[str] = field(default_factory=list)
    """Footnotes."""


def fmt(v: float | None, pct: bool, signed: bool = False) -> str:
    """A value for a table: rates in percent with one decimal, else two decimals."""
    if v is None:
        return DASH
    x = 100.0 * v if pct else v
    sign = "+" if signed else ""
    return f"{x:{sign}.1f}" if pct or abs(x) >= 100 else f"{x:{sign}.2f}"


def fmt_ci(ci: Sequence[float | None] | None, pct: bool) -> str:
    """``[lo, hi]``, or a dash when undefined."""
    if not ci or ci[0] is None or ci[1] is None:
        return DASH
    return f"[{fmt(ci[0], pct)}, {fmt(ci[1], pct)}]"


def _interim_notes(arm: Mapping[str, Any]) -> list[str]:
    out = []
    for k in arm["interim_seeds"]:
        e = arm["per_seed"][str(k)]
        total = e["total_steps"] if e["total_steps"] is not None else "?"
        if e["last_step"] is None:
            out.append(f"{arm['arm']} seed {k} has logged nothing yet (of {total} steps)")
        else:
            out.append(f"{arm['arm']} seed {k} at step {e['last_step']} of {total}")
    return out


def main_table(data: Mapping[str, Any]) -> Table:
    """Arm | mean | CIs | sd | seeds | evaluations | difference vs reference | verdict."""
    pct = is_rate(data["metric"])
    level = f"{100 * data['confidence']:g}%"
    ref = data["reference"]
    comps = {c["arm"]: c for c in data["comparisons"]}
    rows, interim, unverified, assumed = [], [], [], False
    for arm in data["arms"]:
        name = arm["arm"] + (" (reference)" if arm["arm"] == ref else "")
        if arm["interim"]:
            name += INTERIM_MARK
            interim.extend(_interim_notes(arm))
        c = comps.get(arm["arm"])
        diff = verdict = DASH
        if c is not None:
            if not c["step1_verified"]:
                name += STEP1_MARK
                unverified.append(f"{arm['arm']} vs {ref}: {c['step1_detail']}")
            diff = fmt(c["diff"], pct, signed=True)
            if c["ci"][0] is not None:
                diff += f" {fmt_ci(c['ci'], pct)}"
            verdict = c["verdict_text"]
            assumed = assumed or ("sd assumed" in verdict)
        evals = "/".join(str(arm["per_seed"][str(k)]["n_evals"]) for k in arm["seeds"])
        rows.append([name, fmt(arm["mean"], pct), fmt_ci(arm["ci_t"], pct),
                     fmt_ci(arm["ci_bootstrap"], pct), fmt(arm["sd"], pct),
                     str(arm["n_seeds"]), f"{arm['n_evals']} ({evals})", diff, verdict])
    unit = " (%)" if pct else ""
    header = ["arm", f"held-out mean{unit}", f"{level} CI (t)", f"{level} CI (bootstrap)",
              "sd across seeds", "seeds", "evaluations (per seed)",
              f"difference vs {ref} [{level} CI]", "verdict"]
    notes = []
    if interim:
        notes.append(f"{INTERIM_MARK} interim (not at the final step): " + "; ".join(interim))
    if unverified:
        notes.append(f"{STEP1_MARK} step-1 identity not verified: " + "; ".join(unverified))
    if assumed:
        notes.append("sd assumed: an arm with one seed has no sd across seeds; seeds needed "
                     "assumes it equals the within-run sd of its evaluations")
    notes.append(f"mean of per-seed converged-window means (step >= {data['window_start']}); "
                 f"verdict: Holm-corrected p < {data['alpha']:g} with >= 2 seeds per arm "
                 "(paired by seed when possible, else Welch); one seed is always unresolved; "
                 f"seeds needed at power {data['power']:g} (Colas et al. 2018)")
    title = f"{data['metric']}, converged window step >= {data['window_start']}"
    return Table("main", title, header, rows, notes)


def _cell(stats: Mapping[str, Any], pct: bool) -> str:
    if stats["mean"] is None:
        return DASH
    if stats["sd"] is None:
        return fmt(stats["mean"], pct)
    return f"{fmt(stats['mean'], pct)} ± {fmt(stats['sd'], pct)}"


def per_task_table(data: Mapping[str, Any]) -> Table:
    """Arm | Pick | Look | Clean | Heat | Cool | Pick2 | All | Turns (mean ± sd over seeds)."""
    rows = []
    train_turns = False
    for arm in data["arms"]:
        cells = [_cell(arm["per_task"][c], c != "Turns") for c in TASK_COLUMNS]
        if arm["turns_from_training"] and cells[-1] != DASH:
            train_turns = True
            cells[-1] += " (train)"
        iqm = DASH if arm["iqm"] is None else fmt(arm["iqm"], True)
        if arm["ci_iqm"] and arm["ci_iqm"][0] is not None:
            iqm += f" {fmt_ci(arm['ci_iqm'], True)}"
        rows.append([arm["arm"] + (INTERIM_MARK if arm["interim"] else "")] + cells + [iqm])
    b = data["baselines"]
    notes = []
    if b["shown"]:
        for row in b["rows"]:
            rows.append([f"{row['method']} (published, {b['backbone']})"]
                        + [fmt(row["per_task"].get(c), True) for c in TASK_COLUMNS] + [DASH])
        notes.append(f"published: {b['source']}")
    elif b["note"]:
        notes.append(b["note"])
    if train_turns:
        notes.append("(train): Turns from training episodes (episode/length/mean); held-out "
                     "turns (val/length/mean) not logged")
    level = f"{100 * data['confidence']:g}%"
    header = ["arm", *TASK_COLUMNS, f"IQM [{level} CI]"]
    notes.append("success in %, mean ± sd over seeds of the converged-window means; "
                 "All = val/success_rate; IQM: interquartile mean over seeds x the six task "
                 f"types, stratified bootstrap ({data['bootstrap_reps']} resamples)")
    return Table("per_task", f"per task type, converged window step >= {data['window_start']}",
                 header, rows, notes)


def per_seed_table(data: Mapping[str, Any]) -> Table:
    """One row per run: window mean, sd, n, best evaluation and its bias, se, status."""
    pct = is_rate(data["metric"])
    rows = []
    for arm in data["arms"]:
        for k in arm["seeds"]:
            e = arm["per_seed"][str(k)]
            best = DASH if e["best"] is None else f"{fmt(e['best'], pct)} ({e['best_step']})"
            if e["error"]:
                status = "unreadable"
            elif e["total_steps"] is None:
                status = f"step {e['last_step']} (final unknown)"
            elif e["interim"]:
                status = f"interim {e['last_step'] if e['last_step'] is not None else '-'}" \
                         f"/{e['total_steps']}"
            else:
                status = "final"
            rows.append([arm["arm"], str(k), e["dir"], fmt(e["mean"], pct), fmt(e["sd"], pct),
                         str(e["n_evals"]), best, fmt(e["best_bias"], pct, signed=True),
                         fmt(e["binomial_se"], pct), status, (e["fingerprint"] or DASH)[:12]])
    header = ["arm", "seed", "dir", "window mean", "sd", "n", "best (step)", "best's bias",
              "binomial se", "status", "step-1 fingerprint"]
    notes = ["best's bias: expected maximum of n normal draws x the run's sd (the best "
             "evaluation overstates the run by about this much); binomial se: of one "
             "evaluation at the window mean"]
    return Table("per_seed", "per seed", header, rows, notes)


def rise_table(data: Mapping[str, Any]) -> Table:
    """Arm | first evaluation | window mean | rise [+- 1.96 binomial se] | z | seeds that rose."""
    pct = is_rate(data["metric"])
    rows = []
    for arm in data["arms"]:
        r = arm["rise"]
        steps = "/".join(map(str, r["start_steps"])) or DASH
        first = DASH if r["start"] is None else f"{fmt(r['start'], pct)} (step {steps})"
        rise = fmt(r["rise"], pct, signed=True)
        if r["se"] is not None and r["rise"] is not None:
            rise += f" ± {fmt(1.96 * r['se'], pct)}"
        z = DASH if r["z"] is None else f"{r['z']:.1f}"
        rose = f"{r['n_rose']}/{r['n_seeds']}" if r["n_seeds"] else DASH
        rows.append([arm["arm"] + (INTERIM_MARK if arm["interim"] else ""), first,
                     fmt(r["window"], pct), rise, z, rose])
    header = ["arm", "first evaluation", f"window mean (step >= {data['window_start']})",
              "rise ± 1.96 se", "z", "seeds that rose"]
    notes = ["means over the seeds that have both; se: the evaluations' own binomial noise "
             "(first evaluation and window), so |z| > 2 means the policy's held-out success "
             "changed beyond evaluation noise, not that the arm beats another"
             + ("" if pct else "; no se: the metric is not a success rate")]
    return Table("rise", f"{data['metric']}: converged window against the first evaluation",
                 header, rows, notes)


def tables(data: Mapping[str, Any]) -> list[Table]:
    """The four tables."""
    return [main_table(data), rise_table(data), per_task_table(data), per_seed_table(data)]


def to_markdown(data: Mapping[str, Any]) -> str:
    """Every table, with notes, as Markdown."""
    out = [f"# Report: {data['sweep']}", ""]
    for t in tables(data):
        out += [f"## {t.title}", "", "| " + " | ".join(t.header) + " |",
                "|" + "---|" * len(t.header)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in t.rows]
        out += [""] + [f"- {n}" for n in t.notes] + [""]
    if data["notes"]:
        out += ["## Notes", ""] + [f"- {n}" for n in data["notes"]] + [""]
    return "\n".join(out)


_LATEX_ESCAPES = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
                  "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "\\": r"\textbackslash{}", "±": r"$\pm$", "—": "--", "†": r"$^\dagger$",
                  "≥": r"$\geq$"}


def latex_escape(text: str) -> str:
    """Escape LaTeX special characters."""
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)


def to_latex(data: Mapping[str, Any]) -> str:
    """Every table as a LaTeX ``table`` (needs ``booktabs``)."""
    out = [f"% ccpo-lab report: {latex_escape(data['sweep'])} (requires \\usepackage{{booktabs}})"]
    for t in tables(data):
        out += [r"\begin{table}[ht]", r"\centering", r"\small",
                rf"\caption{{{latex_escape(t.title)}}}",
                r"\begin{tabular}{l" + "r" * (len(t.header) - 1) + "}", r"\toprule",
                " & ".join(latex_escape(h) for h in t.header) + r" \\", r"\midrule"]
        out += [" & ".join(latex_escape(c) for c in row) + r" \\" for row in t.rows]
        out += [r"\bottomrule", r"\end{tabular}"]
        out += [rf"\par\footnotesize {latex_escape(n)}" for n in t.notes]
        out += [r"\end{table}", ""]
    return "\n".join(out)


def _csv(header: list[str], rows: list[list[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows([["" if v is None else v for v in row] for row in rows])
    return buf.getvalue()


def csv_tables(data: Mapping[str, Any]) -> dict[str, str]:
    """``{"main": csv, "per_task": csv, "per_seed": csv}``, raw values in metric units."""
    comps = {c["arm"]: c for c in data["comparisons"]}
    main = []
    for a in data["arms"]:
        c = comps.get(a["arm"], {})
        main.append([a["arm"], a["arm"] == data["reference"], a["n_seeds"], a["n_evals"],
                     a["mean"], a["sd"], *a["ci_t"], *a["ci_bootstrap"], a["iqm"],
                     *(a["ci_iqm"] or [None, None]), a["interim"], c.get("diff"),
                     *(c.get("ci") or [None, None]), c.get("p"), c.get("p_holm"),
                     c.get("prob_improvement"), c.get("seeds_needed"), c.get("verdict"),
                     c.get("step1_verified"), a["rise"]["start"], a["rise"]["rise"],
                     a["rise"]["se"], a["rise"]["z"], a["rise"]["n_rose"]])
    per_task = [[a["arm"], col, st["n_seeds"], st["mean"], st["sd"], *st["ci_t"]]
                for a in data["arms"] for col, st in a["per_task"].items()]
    b = data["baselines"]
    if b["shown"]:
        per_task += [[f"{r['method']} (published)", col, 3, v, None, None, None]
                     for r in b["rows"] for col, v in r["per_task"].items()]
    per_seed = [[a["arm"], k, e["dir"], e["mean"], e["sd"], e["n_evals"], e["best"],
                 e["best_step"], e["best_bias"], e["binomial_se"], e["n_episodes"],
                 e["last_step"], e["total_steps"], e["interim"], e["fingerprint"],
                 e["start"], e["start_step"]]
                for a in data["arms"] for k, e in a["per_seed"].items()]
    return {
        "main": _csv(["arm", "reference", "n_seeds", "n_evals", "mean", "sd", "ci_t_low",
                      "ci_t_high", "ci_bootstrap_low", "ci_bootstrap_high", "iqm",
                      "iqm_ci_low", "iqm_ci_high", "interim", "diff", "diff_ci_low",
                      "diff_ci_high", "p", "p_holm", "prob_improvement", "seeds_needed",
                      "verdict", "step1_verified", "start", "rise", "rise_se", "rise_z",
                      "n_rose"], main),
        "per_task": _csv(["arm", "column", "n_seeds", "mean", "sd", "ci_t_low", "ci_t_high"],
                         per_task),
        "per_seed": _csv(["arm", "seed", "dir", "mean", "sd", "n_evals", "best", "best_step",
                          "best_bias", "binomial_se", "n_episodes", "last_step",
                          "total_steps", "interim", "fingerprint", "start", "start_step"],
                         per_seed),
    }


def to_csv(data: Mapping[str, Any]) -> str:
    """The three CSV tables, each after a ``# <name>`` line, separated by blank lines."""
    return "\n".join(f"# {name}\n{text}" for name, text in csv_tables(data).items())
