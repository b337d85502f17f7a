"""The report's tables (and figures) as LaTeX that compiles into a paper page.

:func:`to_latex` is the fragment to ``\\input`` into a paper (``tables.tex``; ``ccpo-lab
report --format latex``): booktabs tables whose arm column wraps (``tabularx``), so each
fits the column it is set in; in a two-column document they become ``table*`` and span
both columns (the ``ccpotable`` environment chooses). Symbols are math (``$\\geq$``,
``$\\pm$``, ``$<$``, ``$|z|$``), never raw characters that the default OT1 font encoding
prints as other glyphs; the output is pure ASCII. :func:`latex_document` is the
standalone ``report.tex``: the same tables and the figures (vector PDF), compiled by
``pdflatex`` in the tests, in one and in two columns, without an overfull box.
Needs ``booktabs``, ``tabularx`` and (for figures) ``graphicx``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ccpo_lab.report.model import ReportModel
from ccpo_lab.report.tables import Table, tables

PACKAGES = ("booktabs", "tabularx", "graphicx")
"""What :func:`latex_document` loads (``texlive-latex-recommended`` has booktabs)."""

_ESCAPES = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
            "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
            "\\": r"\textbackslash{}", "±": r"$\pm$", "—": "---", "–": "--", "−": "$-$",
            "†": r"$^{\dagger}$", "‡": r"$^{\ddagger}$", "≥": r"$\geq$", "≤": r"$\leq$",
            "<": "$<$", ">": "$>$", "|": r"$|$", "×": r"$\times$", "Δ": r"$\Delta$",
            "α": r"$\alpha$", "'": "'", "·": r"$\cdot$", "…": r"\dots{}",
            "²": r"$^{2}$", "Š": r"\v{S}", "á": r"\'{a}"}
_SIGN = re.compile(r"(^|(?<=[\s\[(]))([-+])(?=\d)")
_PM = re.compile(r"^(\S+) ± (\S+)(.*)$")
_ADJACENT_MATH = re.compile(r"(?<!\\)\$\$")

PREAMBLE = r"""% ccpo-lab report tables: \usepackage{booktabs,tabularx} in the preamble.
% In a two-column document each table spans both columns (table*).
\makeatletter
\@ifundefined{ccpotable}{%
\newenvironment{ccpotable}[1][tbp]{\if@twocolumn\def\ccpo@f{table*}\else
  \def\ccpo@f{table}\fi\@nameuse{\ccpo@f}[#1]}{\@nameuse{end\ccpo@f}}%
\newenvironment{ccpofigure}[1][tbp]{\if@twocolumn\def\ccpo@f{figure*}\else
  \def\ccpo@f{figure}\fi\@nameuse{\ccpo@f}[#1]}{\@nameuse{end\ccpo@f}}%
}{}
\makeatother"""


def latex_escape(text: str) -> str:
    """Escape LaTeX special characters; symbols become math, signs of numbers minus signs.

    Raises:
        ValueError: for a non-ASCII character without a LaTeX form (so none reaches the
            output, where the default font encoding would print another glyph).
    """
    text = _SIGN.sub(lambda m: m.group(1) + ("$-$" if m.group(2) == "-" else "$+$"), text)
    out = []
    i = 0
    while i < len(text):
        if text.startswith("$-$", i) or text.startswith("$+$", i):
            out.append(text[i:i + 3])
            i += 3
            continue
        ch = text[i]
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif not ch.isascii():
            raise ValueError(f"no LaTeX form for {ch!r} in {text!r}")
        else:
            out.append(ch)
        i += 1
    return _ADJACENT_MATH.sub("", "".join(out))


def _cell(text: str) -> str:
    """A cell; ``a ± b`` is set as ``a`` with ``±b`` as a subscript (narrow columns)."""
    m = _PM.match(text)
    if m:
        sd = latex_escape(m.group(2)).replace("$", "")
        return f"{latex_escape(m.group(1))}$_{{\\pm {sd}}}${latex_escape(m.group(3))}"
    return latex_escape(text)


_HEADER = {"p": "$p$", "p (Holm)": r"$p_{\mathrm{Holm}}$", "P(X>Y)": r"$P(X{>}Y)$",
           "z": "$z$", "n": "$n$", "Δ": r"$\Delta$"}


def _head_text(title: str) -> str:
    for key, tex in sorted(_HEADER.items(), key=lambda kv: -len(kv[0])):
        if title == key:
            return tex
        if title.startswith(key + " "):
            return tex + " " + latex_escape(title[len(key) + 1:])
    return latex_escape(title)


def _head(title: str, align: str) -> str:
    """A header cell; a long one is stacked on two lines (narrow numeric columns)."""
    words = title.split(" ")
    if len(title) <= 8 or len(words) < 2:
        return _head_text(title)
    # split at the space nearest the middle
    cut = min(range(1, len(words)),
              key=lambda i: abs(len(" ".join(words[:i])) - len(" ".join(words[i:]))))
    top, bottom = " ".join(words[:cut]), " ".join(words[cut:])
    return rf"\shortstack[{align}]{{{_head_text(top)}\\{_head_text(bottom)}}}"


MAX_ROWS = 40
"""Rows per float: a longer table is split into parts ("continued") that each fit a page."""


def column_notes(t: Table) -> list[str]:
    """The notes that carry a table's ``latex_note`` columns: ``title: row label value;
    ...`` (the row label is its first cell), one per such column."""
    return [f"{c.title}: " + "; ".join(f"{row[0]} {row[i]}" for row in t.rows)
            for i, c in enumerate(t.columns) if c.latex_note and t.rows]


def table_latex(t: Table, label_prefix: str = "ccpo") -> list[str]:
    """One table as ``ccpotable`` floats with a booktabs ``tabularx`` of the column's width
    (several floats of :data:`MAX_ROWS` rows when it is longer; notes under the last,
    first those of its ``latex_note`` columns: :func:`column_notes`)."""
    keep = [i for i, c in enumerate(t.columns) if not c.latex_note]
    notes = (*column_notes(t), *t.notes)
    t = replace(t, columns=tuple(t.columns[i] for i in keep),
                rows=tuple(tuple(row[i] for i in keep) for row in t.rows), notes=notes)
    spec = "".join(r">{\raggedright\arraybackslash}X" if c.wrap else c.align
                   for c in t.columns)
    parts = [t.rows[i:i + MAX_ROWS] for i in range(0, max(len(t.rows), 1), MAX_ROWS)]
    out: list[str] = []
    for k, rows in enumerate(parts):
        title = latex_escape(t.title) + (f" (continued, {k + 1}/{len(parts)})" if k else "")
        out += [r"\begin{ccpotable}[htbp]", r"\centering", r"\footnotesize",
                r"\setlength{\tabcolsep}{3pt}", rf"\caption{{{title}}}"]
        if k == 0:
            out.append(rf"\label{{tab:{label_prefix}-{t.name}}}")
        out += [rf"\begin{{tabularx}}{{\linewidth}}{{{spec}}}", r"\toprule",
                " & ".join(_head(c.title, c.align) for c in t.columns) + r" \\", r"\midrule"]
        out += [" & ".join(_cell(c) for c in row) + r" \\" for row in rows]
        out += [r"\bottomrule", r"\end{tabularx}"]
        if k == len(parts) - 1:
            out += [r"\par\smallskip\raggedright " + latex_escape(n) for n in t.notes]
        out += [r"\end{ccpotable}", ""]
    return out


def to_latex(model: ReportModel) -> str:
    """Every table as LaTeX (the ``tables.tex`` fragment, with its environment definitions)."""
    out = [f"% ccpo-lab report: {latex_escape(model.sweep)}", PREAMBLE, ""]
    for t in tables(model):
        out += table_latex(t)
    return "\n".join(out)


def latex_document(model: ReportModel, figures: Sequence[tuple[str, str, bool]] = (),
                   twocolumn: bool = False) -> str:
    """A standalone document: the tables, then each figure ``(pdf file, caption, wide)``
    (wide ones span the page, the others one column).

    Args:
        model: the report.
        figures: ``(file name next to the .tex, caption, wide)`` per figure.
        twocolumn: ``\\documentclass[twocolumn]{article}`` instead of one column.
    """
    out = [rf"\documentclass{'[twocolumn]' if twocolumn else ''}{{article}}",
           rf"\usepackage{{{','.join(PACKAGES)}}}", r"\begin{document}",
           rf"\section*{{Report: {latex_escape(model.sweep)}}}",
           r"Held-out results of the sweep; tables and figures are written by "
           r"\texttt{ccpo-lab report}.", "", to_latex(model)]
    for name, caption, wide in figures:
        env = "ccpofigure" if wide else "figure"
        width = r"\linewidth" if wide else r"\columnwidth"
        out += [rf"\begin{{{env}}}[htbp]", r"\centering",
                rf"\includegraphics[width={width}]{{{name}}}",
                rf"\caption{{{latex_escape(caption)}}}", rf"\end{{{env}}}", ""]
    out += [r"\end{document}", ""]
    return "\n".join(out)
