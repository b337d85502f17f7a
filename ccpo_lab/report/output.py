"""Rendering a report to one format (standard output) or to every file (``--out DIR``).

The formats are one table, :data:`REPORT_FORMATS`: adding a format is its module and one
row here (``--format``'s choices, its error and its help text follow).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ccpo_lab.config.yamlio import atomic_write_text
from ccpo_lab.errors import UserError
from ccpo_lab.report.analysis import Report
from ccpo_lab.report.directory import write_report_dir
from ccpo_lab.report.export import csv_tables, to_csv, to_json
from ccpo_lab.report.latex import latex_document, to_latex
from ccpo_lab.report.model import ReportModel
from ccpo_lab.report.plots import FIGURES, write_figures
from ccpo_lab.report.tables import to_markdown

Listed = Sequence[tuple[str, str]]
"""``(files, what it shows)`` of the figures a Markdown report lists."""
Embedded = Sequence[tuple[str, str, bool]]
"""``(pdf file, what it shows, wide)`` of the figures a LaTeX document includes."""


@dataclass(frozen=True)
class ReportFormat:
    """One output format of ``ccpo-lab report``."""

    name: str
    """``--format`` value."""
    render: Callable[[ReportModel], str]
    """The report in this format, for standard output."""
    files: Callable[[ReportModel, Listed, Embedded], dict[str, str]]
    """File name -> text of what ``--out DIR`` writes for it, given the figures."""


REPORT_FORMATS: tuple[ReportFormat, ...] = (
    ReportFormat("md", to_markdown,
                 lambda m, listed, _: {"report.md": to_markdown(m, listed)}),
    ReportFormat("csv", to_csv,
                 lambda m, _l, _e: {f"{n}.csv": t for n, t in csv_tables(m).items()}),
    ReportFormat("latex", to_latex,
                 lambda m, _, embedded: {"report.tex": latex_document(m, embedded),
                                         "tables.tex": to_latex(m)}),
    ReportFormat("json", to_json,
                 lambda m, _l, _e: {"report.json": to_json(m, indent=2)}),
)
"""Every format, in the order ``--format``'s help lists them."""

FORMATS = tuple(f.name for f in REPORT_FORMATS)
FILE_ORDER = ("md", "latex", "json", "csv")
"""The order ``--out`` writes the formats' files in."""


def render(model: ReportModel, fmt: str) -> str:
    """The report in one format: ``md``, ``csv``, ``latex`` (the tables fragment) or ``json``."""
    for f in REPORT_FORMATS:
        if f.name == fmt:
            return f.render(model)
    raise UserError("unknown report format", key="--format", value=fmt, valid=FORMATS)


def figure_list() -> list[tuple[str, str]]:
    """``(files, what it shows)`` of every figure, for notes and report.md."""
    return [(f"{f.stem}.png / {f.stem}.pdf", f.what) for f in FIGURES]


def write_all(report: Report, out_dir: str | Path, plots: bool = True) -> list[Path]:
    """Write every format, the CSV tables and (``plots``) the figures into ``out_dir``,
    whole or not at all (:func:`ccpo_lab.report.directory.write_report_dir`: a temporary
    sibling renamed into place; a full or read-only disk leaves ``out_dir`` as it was).

    Files: ``report.md`` (tables, notes, the list of figures), ``report.tex`` (a standalone
    document: tables and figures), ``tables.tex`` (the tables alone, to ``\\input`` into a
    paper), ``report.json``, ``arms.csv``, ``comparisons.csv``, ``per_task.csv``,
    ``per_seed.csv``, and each figure of :data:`ccpo_lab.report.plots.FIGURES` as ``.png``
    (300 dpi) and ``.pdf``. Returns their paths.
    """
    model = report.model

    def fill(out: Path) -> list[Path]:
        figures: list[tuple[str, str, bool]] = []
        written = []
        if plots:

            written += write_figures(report, out)
            figures = [(f"{f.stem}.pdf", f.what, f.wide) for f in FIGURES]
        listed = figure_list() if plots else ()
        by_name = {f.name: f for f in REPORT_FORMATS}
        texts = {name: text for fmt in sorted(by_name, key=_file_rank)
                 for name, text in by_name[fmt].files(model, listed, figures).items()}
        for name, text in texts.items():
            atomic_write_text(out / name, text)
            written.append(out / name)
        return written

    return write_report_dir(out_dir, fill, report.sweep_dir)


def _file_rank(fmt: str) -> int:
    return FILE_ORDER.index(fmt) if fmt in FILE_ORDER else len(FILE_ORDER)
