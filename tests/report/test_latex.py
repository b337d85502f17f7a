"""report.tex compiles into a paper page, in one and in two columns, with no overfull box.

Needs ``pdflatex`` with ``booktabs`` (Debian: ``texlive-latex-base`` and
``texlive-latex-recommended``); skipped with that reason otherwise. Slow: it writes a
whole report (figures included) and runs pdflatex several times.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ccpo_lab.report.analysis import Report, build_report
from ccpo_lab.report.latex import latex_document, latex_escape, table_latex
from ccpo_lab.report.output import write_all
from ccpo_lab.report.plots import FIGURES
from ccpo_lab.report.tables import table_markdown, tables, to_markdown
from tests.report.builders import demo_like_study, init_sweep, log_evals, sweep_file

pytestmark = pytest.mark.slow


def _tex_available() -> str | None:
    if shutil.which("pdflatex") is None:
        return "pdflatex not installed (apt-get install texlive-latex-base)"
    found = subprocess.run(["kpsewhich", "booktabs.sty"], capture_output=True, text=True)
    if not found.stdout.strip():
        return "booktabs.sty not installed (apt-get install texlive-latex-recommended)"
    return None


needs_tex = pytest.mark.skipif(_tex_available() is not None, reason=str(_tex_available()))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Report:
    tmp = tmp_path_factory.mktemp("demo")
    return build_report(demo_like_study(tmp, tmp / "results"))


def _compile(tex: Path) -> str:
    """Run pdflatex twice (floats and labels settle); return the log, fail on an error."""
    for _ in range(2):
        res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                              tex.name], cwd=tex.parent, capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, res.stdout[-3000:]
    return tex.with_suffix(".log").read_text(encoding="latin-1")


def _clean(log: str) -> None:
    assert "Overfull" not in log, re.findall(r"Overfull.*", log)
    assert "LaTeX Error" not in log and "Missing character" not in log
    assert "Float too large" not in log


@needs_tex
def test_report_tex_compiles_in_one_and_two_columns(demo: Report, tmp_path: Path) -> None:
    out = tmp_path / "report"
    write_all(demo, out)
    assert (out / "report.tex").read_text().isascii()
    _clean(_compile(out / "report.tex"))
    figures = [(f"{f.stem}.pdf", f.what, f.wide) for f in FIGURES]
    (out / "twocol.tex").write_text(latex_document(demo.model, figures, twocolumn=True))
    _clean(_compile(out / "twocol.tex"))
    # the fragment a paper \inputs, in a bare article
    (out / "paper.tex").write_text("\\documentclass{article}\\usepackage{booktabs,tabularx}"
                                   "\\begin{document}\\input{tables.tex}\\end{document}\n")
    _clean(_compile(out / "paper.tex"))
    for f in FIGURES:  # figures are vector: no embedded raster image
        assert b"/Subtype /Image" not in (out / f"{f.stem}.pdf").read_bytes()


@needs_tex
def test_widest_tables_fit_one_column(tmp_path: Path) -> None:
    # 18 seeds: the bootstrap intervals of the mean and of the IQM appear (two more columns)
    p = sweep_file(tmp_path, arms=("ccpo-return-hard-fbjw", "ccpo-global-successor", "grpo"),
                   seeds=tuple(range(18)), analysis={"reference": "grpo"})
    _, sweep_dir, rds = init_sweep(p, tmp_path / "results")
    for (arm, seed), rd in rds.items():
        v = 0.5 + 0.01 * seed + (0.05 + 0.002 * (seed % 3) if arm != "grpo" else 0.0)
        log_evals(rd, {20: v, 25: v, 30: v}, tasks={s: (v,) * 6 for s in (20, 25, 30)})
    rep = build_report(sweep_dir, {"bootstrap_reps": 500})
    md = to_markdown(rep.model)
    assert "| 95% CI (bootstrap) |" in md and "| IQM 95% CI |" in md
    assert "| P(X>Y) 95% CI |" in md
    (tmp_path / "t.tex").write_text(latex_document(rep.model))
    _clean(_compile(tmp_path / "t.tex"))


_NUMBER = re.compile(r"\d+\.\d+|\d+")


def test_latex_shows_the_numbers_of_the_markdown(demo: Report) -> None:
    """Row by row; a ``latex_note`` column's numbers in its note under the table."""
    for t in tables(demo.model):
        md = table_markdown(t)[2:]
        latex = table_latex(t)
        tex = [x for x in latex if x.endswith(r" \\")][1:]  # rows, not the header
        assert len(md) == len(tex) == len(t.rows) > 0
        noted = [i for i, c in enumerate(t.columns) if c.latex_note]
        for row, m, x in zip(t.rows, md, tex, strict=True):
            assert _NUMBER.findall(m) == _NUMBER.findall(" ".join(row))
            want = _NUMBER.findall(" ".join(c for i, c in enumerate(row) if i not in noted))
            assert _NUMBER.findall(x.removesuffix(r" \\")) == want, (x, want)
        for i in noted:
            note = next(x for x in latex if x.endswith(latex_escape(
                f"{t.columns[i].title}: " + "; ".join(f"{r[0]} {r[i]}" for r in t.rows))))
            assert _NUMBER.findall(note) == _NUMBER.findall(" ".join(
                f"{r[0]} {r[i]}" for r in t.rows))


@needs_tex
def test_adaptive_tables_fit_one_and_two_columns(tmp_path: Path) -> None:
    from tests.adaptive.studies import finished_study

    rep = build_report(finished_study(tmp_path), {"bootstrap_reps": 500})
    assert rep.model.adaptive is not None
    for twocolumn in (False, True):
        tex = tmp_path / f"adaptive{int(twocolumn)}.tex"
        tex.write_text(latex_document(rep.model, twocolumn=twocolumn))
        assert tex.read_text().isascii()
        _clean(_compile(tex))
    for t in tables(rep.model):  # the same numbers as the Markdown
        if t.name.startswith("adaptive"):
            md = table_markdown(t)[2:]
            rows = [x for x in table_latex(t) if x.endswith(r" \\")][1:]
            assert [_NUMBER.findall(m) for m in md] == \
                [_NUMBER.findall(x.removesuffix(r" \\")) for x in rows]
