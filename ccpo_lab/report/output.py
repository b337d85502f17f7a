"""Rendering a report to one format (standard output) or to every file (``--out DIR``)."""

from __future__ import annotations

from pathlib import Path

from ccpo_lab.config.yamlio import atomic_write_text
from ccpo_lab.errors import UserError
from ccpo_lab.report.analysis import Report
from ccpo_lab.report.export import csv_tables, to_csv, to_json
from ccpo_lab.report.latex import latex_document, to_latex
from ccpo_lab.report.model import ReportModel
from ccpo_lab.report.tables import to_markdown

FORMATS = ("md", "csv", "latex", "json")


def render(model: ReportModel, fmt: str) -> str:
    """The report in one format: ``md``, ``csv``, ``latex`` (the tables fragment) or ``json``."""
    if fmt == "md":
        return to_markdown(model)
    if fmt == "csv":
        return to_csv(model)
    if fmt == "latex":
        return to_latex(model)
    if fmt == "json":
        return to_json(model)
    raise UserError("unknown report format", key="--format", value=fmt, valid=FORMATS)


def figure_list() -> list[tuple[str, str]]:
    """``(files, what it shows)`` of every figure, for notes and report.md."""
    from ccpo_lab.report.plots import FIGURES

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
    from ccpo_lab.report.directory import write_report_dir

    model = report.model

    def fill(out: Path) -> list[Path]:
        figures: list[tuple[str, str, bool]] = []
        written = []
        if plots:
            from ccpo_lab.report.plots import FIGURES, write_figures

            written += write_figures(report, out)
            figures = [(f"{f.stem}.pdf", f.what, f.wide) for f in FIGURES]
        texts = {"report.md": to_markdown(model, figure_list() if plots else ()),
                 "report.tex": latex_document(model, figures),
                 "tables.tex": to_latex(model),
                 "report.json": to_json(model, indent=2),
                 **{f"{name}.csv": text for name, text in csv_tables(model).items()}}
        for name, text in texts.items():
            atomic_write_text(out / name, text)
            written.append(out / name)
        return written

    return write_report_dir(out_dir, fill, report.sweep_dir)
