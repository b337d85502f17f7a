"""The cross-environment section in every format: Markdown, CSV, LaTeX, JSON and a figure
(the per-environment differences to the reference on one page)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from ccpo_lab.config.identity import to_plain
from ccpo_lab.config.yamlio import atomic_write_text
from ccpo_lab.report.across import AcrossSection, CrossRow
from ccpo_lab.report.numbers import is_rate
from ccpo_lab.report.tables import fmt, fmt_ci, fmt_p

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["FILES", "across_csv", "across_json", "across_latex", "across_markdown",
           "write_across"]

FILES = ("across.md", "across.csv", "across.json", "across.tex", "across.png", "across.pdf")
"""What :func:`write_across` writes."""


def _cell(row: CrossRow, i: int, pct: bool) -> str:
    c = row.cells[i]
    if c.verdict == "absent":
        return "absent"
    return f"{fmt(c.diff, pct, signed=True)} {fmt_ci(c.ci, pct)} {c.verdict}"


def _interaction(row: CrossRow, pct: bool, alpha: float) -> str:
    it = row.interaction
    if it is None:
        return "not testable"
    head = (f"{fmt(it.estimate, pct, signed=True)} {fmt_ci(it.ci, pct)}, "
            if it.estimate is not None else "")
    return f"{head}{it.test}, p_holm {fmt_p(row.p_holm, alpha)}"


def across_markdown(s: AcrossSection) -> str:
    """The section as Markdown: what it is, the table, its notes."""
    pct = is_rate(s.metric)
    unit = " (points)" if pct else ""
    lines = ["## Across environments", "",
             f"Each comparison on every environment ({', '.join(s.environments)}): the "
             f"difference to the reference in {s.metric}{unit}, its {s.confidence:.0%} "
             "interval and that environment's verdict; whether the directions agree; the "
             "arm x environment interaction (is the advantage different between "
             "environments: paired by seed where every environment ran the same seeds; "
             "with two environments the first minus the second), Holm over the "
             f"comparisons at {s.alpha:g}. holds: the same resolved verdict everywhere; "
             "differs: the interaction is significant; unresolved: the data do not say "
             "whether the conclusion carries over.", ""]
    head = ["comparison", *s.environments, "directions", "interaction", "across"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in s.rows:
        cells = [_cell(r, i, pct) for i in range(len(s.environments))]
        lines.append("| " + " | ".join([f"{r.arm} vs {r.reference}", *cells, r.directions,
                                        _interaction(r, pct, s.alpha), r.verdict]) + " |")
    if not s.rows:
        lines.append("| (no comparison found on every environment) |")
    lines += [""] + [f"- {r.arm}: {r.reason}" for r in s.rows] + [f"- {n}" for n in s.notes]
    return "\n".join(lines) + "\n"


def across_csv(s: AcrossSection) -> str:
    """One row per (comparison, environment), the interaction repeated on each."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["arm", "reference", "environment", "diff", "ci_low", "ci_high", "p_holm",
                "verdict", "n_seeds", "directions", "interaction_test", "interaction",
                "interaction_ci_low", "interaction_ci_high", "interaction_statistic",
                "interaction_df", "interaction_p", "interaction_p_holm", "paired", "across"])
    for r in s.rows:
        it = r.interaction
        tail = ([it.test, it.estimate, *(it.ci or (None, None)), it.statistic,
                 " ".join(f"{d:g}" for d in it.df), it.p] if it else [None] * 7)
        for c in r.cells:
            w.writerow([r.arm, r.reference, c.environment, c.diff, *c.ci, c.p_holm,
                        c.verdict, c.n_seeds, r.directions, *tail, r.p_holm, r.paired,
                        r.verdict])
    return buf.getvalue()


def across_json(s: AcrossSection) -> str:
    """The section as JSON (a non-finite number as null)."""
    def finite(v: object) -> object:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: finite(x) for k, x in v.items()}
        if isinstance(v, list):
            return [finite(x) for x in v]
        return v
    return json.dumps(finite(to_plain(s)), indent=2, allow_nan=False, default=str)


def _tex(text: str) -> str:
    return (text.replace("\\", r"\textbackslash{}").replace("_", r"\_").replace("%", r"\%")
            .replace("&", r"\&").replace("#", r"\#").replace("<", "$<$").replace(">", "$>$"))


def across_latex(s: AcrossSection) -> str:
    """A booktabs table of the section, the width of the text (``tabularx``: its
    comparison, environment and interaction columns wrap; ``\\usepackage{booktabs,
    tabularx}`` as for ``tables.tex``), a ``table*`` float: both columns of a two-column
    document."""
    pct = is_rate(s.metric)
    wrap = r">{\raggedright\arraybackslash}X"
    cols = wrap * (1 + len(s.environments)) + "l" + wrap + "l"
    out = [r"\begin{table*}[tbp]", r"\small\setlength{\tabcolsep}{3pt}",
           r"\caption{Across environments: each comparison's difference to the reference "
           + ("(points) " if pct else "") + f"with its {s.confidence:.0%} interval and "
           r"verdict per environment, and the arm $\times$ environment interaction (Holm "
           f"at {s.alpha:g}).}}".replace("%", r"\%"),
           r"\begin{tabularx}{\linewidth}{" + cols + "}", r"\toprule",
           " & ".join(["comparison", *map(_tex, s.environments), "directions",
                       "interaction", "across"]) + r" \\", r"\midrule"]
    for r in s.rows:
        cells = [_cell(r, i, pct) for i in range(len(s.environments))]
        out.append(" & ".join(_tex(x) for x in [f"{r.arm} vs {r.reference}", *cells,
                                               r.directions, _interaction(r, pct, s.alpha),
                                               r.verdict]) + r" \\")
    out += [r"\bottomrule", r"\end{tabularx}", r"\end{table*}"]
    return "\n".join(out) + "\n"


def across_figure(s: AcrossSection, out: Path) -> list[Path]:
    """``across.png`` and ``across.pdf``: per comparison, each environment's difference to
    the reference with its interval, side by side (one colour per environment)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ccpo_lab.report.plots import DPI, STYLE, WIDE_IN

    pct = is_rate(s.metric)
    scale = 100.0 if pct else 1.0
    n, k = max(len(s.rows), 1), len(s.environments)
    with matplotlib.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(WIDE_IN, 0.8 + 0.35 * n * max(k, 2) / 2))
        _draw_across(ax, s, scale, pct)
        paths = [out / "across.png", out / "across.pdf"]
        for p in paths:
            fig.savefig(p, dpi=DPI, metadata={"Creator": "ccpo-lab"} if p.suffix == ".pdf"
                        else None)
    plt.close(fig)
    return paths


def _draw_across(ax: Axes, s: AcrossSection, scale: float, pct: bool) -> None:
    """The forest plot of :func:`across_figure` on ``ax``."""
    k = len(s.environments)
    for j, env in enumerate(s.environments):
        label: str | None = env  # on the environment's first point (a row may lack it)
        for i, r in enumerate(s.rows):
            c = r.cells[j]
            if c.diff is None:
                continue
            y = i + (j - (k - 1) / 2) * 0.8 / max(k, 1)
            lo, hi = c.ci
            if lo is not None and hi is not None:
                ax.plot([lo * scale, hi * scale], [y, y], color=f"C{j}", lw=1.2)
            ax.plot(c.diff * scale, y, "o", ms=3.5, color=f"C{j}", label=label)
            label = None
    ax.axvline(0.0, color="0.4", lw=0.8, ls="--")
    ax.set_yticks(range(len(s.rows)), [f"{r.arm} vs {r.reference}\n({r.verdict})"
                                       for r in s.rows])
    ax.invert_yaxis()
    ax.set_xlabel(f"difference to the reference, {s.metric}" + (" (points)" if pct else ""))
    ax.set_title(f"Across environments ({s.confidence:.0%} intervals)")
    if s.rows:
        ax.legend(loc="best")


def write_across(s: AcrossSection, out: Path) -> list[Path]:
    """Every file of :data:`FILES` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    figure = ("\n![Each environment's difference to the reference, per comparison]"
              "(across.png)\n")
    texts = {"across.md": across_markdown(s) + figure, "across.csv": across_csv(s),
             "across.json": across_json(s), "across.tex": across_latex(s)}
    written = []
    for name, text in texts.items():
        atomic_write_text(out / name, text)
        written.append(out / name)
    return written + across_figure(s, out)
