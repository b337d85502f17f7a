"""Each comparison's seed correlation in the Markdown and LaTeX tables (issue 31).

The comparisons table has a ``seed corr.`` column (the correlation of the two arms'
window means across their common seeds, with its Fisher-z interval from 4 common seeds, a
dash when undefined); its notes say what the column is and, one line per meaning, what
each correlation means for the test used. LaTeX sets the column as a note under the table
(in one column the table has no width to spare) and still compiles without an overfull
box.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ccpo_lab.report.analysis import build_report
from ccpo_lab.report.latex import latex_document, latex_escape, table_latex
from ccpo_lab.report.model import ComparisonRow, ReportModel
from ccpo_lab.report.tables import DASH, Table, comparisons_table, table_markdown, to_markdown
from tests.report.builders import init_sweep, log_evals, sweep_file
from tests.report.test_pairs import study as pairs_study

SEEDS = (0, 1, 2, 3, 4)


def five_seeds(tmp_path: Path) -> Path:
    """grpo (reference) and gigpo share a seed effect (0.05 per seed); ccpo-return-hard
    scores 0.5 on every seed (no spread: no correlation)."""
    p = sweep_file(tmp_path, arms=("grpo", "gigpo", "ccpo-return-hard"), seeds=SEEDS,
                   analysis={"reference": "grpo"})
    _, sweep_dir, rds = init_sweep(p, tmp_path / "results")
    for (arm, seed), rd in rds.items():
        base = 0.3 + 0.05 * seed
        v = {"grpo": base, "gigpo": base + 0.1 + (0.01 if seed % 2 else -0.01),
             "ccpo-return-hard": 0.5}[arm]
        log_evals(rd, {0: 0.1, 20: v, 25: v, 30: v}, train_steps=range(1, 31))
    return sweep_dir


def _cells(t: Table, column: str) -> dict[str, str]:
    """Each Markdown row's cell of ``column``, by its arm (marks ``*``, ``†`` dropped)."""
    lines = table_markdown(t)
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    k = head.index(column)
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    return {r[0].rstrip("*†"): r[k] for r in rows}


def _row(model: ReportModel, arm: str) -> ComparisonRow:
    return next(c for c in model.comparisons if c.arm == arm)


def test_markdown_shows_the_correlation_with_its_interval_or_a_dash(tmp_path: Path) -> None:
    model = build_report(five_seeds(tmp_path)).model
    gigpo = _row(model, "gigpo")
    r, (low, high) = gigpo.seed_correlation, gigpo.ci_seed_correlation
    assert r is not None and low is not None and high is not None and r > 0.9 and low > 0
    t = comparisons_table(model)
    assert "seed corr." in t.header
    assert t.header.index("seed corr.") < t.header.index("seeds needed")
    cells = _cells(t, "seed corr.")
    assert cells["gigpo"] == f"{r:.2f} [{low:.2f}, {high:.2f}]"
    assert _row(model, "ccpo-return-hard").seed_correlation is None
    assert cells["ccpo-return-hard"] == DASH  # no spread across seeds
    md = to_markdown(model)
    assert "- seed corr. = Pearson correlation of the arm's and grpo's window means across " \
           "their common seeds, with its 95% Fisher-z interval from 4 common seeds; " \
           f"{DASH} below 3 common seeds" in md
    # what each correlation means for the test, without repeating the numbers
    assert "- seed corr. of gigpo: the seeds share an effect; pairing removes it\n" in md
    assert "- seed corr. of ccpo-return-hard: an arm has no spread across seeds\n" in md
    assert "no evidence of a shared seed effect" not in md  # every value has its interval


def test_three_seeds_give_a_value_without_interval_one_seed_a_dash(study: Path) -> None:
    """The hand-computed study: grpo .5 .625 .75 and gigpo .75 .75 .875 (r = 3 / sqrt(12)
    = 0.866 over 3 seeds, no interval); ccpo-return-hard has one seed (Welch: none)."""
    model = build_report(study).model
    assert _row(model, "gigpo").seed_correlation == pytest.approx(3 / 12 ** 0.5)
    cells = _cells(comparisons_table(model), "seed corr.")
    assert cells["gigpo"] == "0.87"
    assert cells["ccpo-return-hard"] == DASH
    md = to_markdown(model)
    assert "a value without an interval (3 common seeds) is no evidence of a shared seed " \
           "effect" in md
    assert "- seed corr. of gigpo: no clear shared seed effect; pairing keeps 2 df where " \
           "an unpaired test has 4" in md
    assert "seed corr. of ccpo-return-hard" not in md  # one seed: nothing to say


def test_pairs_that_mean_the_same_share_one_line(tmp_path: Path) -> None:
    md = to_markdown(build_report(pairs_study(tmp_path)).model)
    assert "- seed corr. = Pearson correlation of the arm's and its pair's window means" in md
    assert "- seed corr. of ccpo-return-hard-as-run vs ccpo-return-hard, " \
           "ccpo-global-successor-as-run vs ccpo-global-successor: the seeds share an " \
           "effect; pairing removes it\n" in md


def test_latex_sets_the_column_as_a_note_under_the_table(tmp_path: Path) -> None:
    model = build_report(five_seeds(tmp_path)).model
    t = comparisons_table(model)
    tex = "\n".join(table_latex(t))
    cells = _cells(t, "seed corr.")
    # the tabular has every column but the correlation's
    spec = next(x for x in tex.splitlines() if x.startswith(r"\begin{tabularx}"))
    assert spec.endswith("X" + "r" * (len(t.columns) - 3) + "l}")
    assert "corr." not in next(x for x in tex.splitlines() if x.startswith("arm & "))
    names = [row[0] for row in t.rows]  # with their marks (step 1 not verified here)
    assert [n.rstrip("†") for n in names] == ["gigpo", "ccpo-return-hard"]
    note = latex_escape(f"seed corr.: {names[0]} {cells['gigpo']}; {names[1]} {DASH}")
    assert "\n" + r"\par\smallskip\raggedright " + note + "\n" in tex
    assert note.endswith("---") and "$-$" not in note  # r > 0, and its interval too
    # the column's note comes first, then the notes of the Markdown, in their order
    lines = tex.splitlines()
    at = lines.index(r"\par\smallskip\raggedright " + note)
    assert lines[at - 2:at] == [r"\bottomrule", r"\end{tabularx}"]
    assert [x.removeprefix(r"\par\smallskip\raggedright ") for x in lines[at + 1:-1]] == \
        [latex_escape(n) for n in t.notes]


def _tex_missing() -> str | None:
    if shutil.which("pdflatex") is None:
        return "pdflatex not installed (apt-get install texlive-latex-base)"
    found = subprocess.run(["kpsewhich", "booktabs.sty"], capture_output=True, text=True)
    return None if found.stdout.strip() else "booktabs.sty not installed"


@pytest.mark.slow
@pytest.mark.skipif(_tex_missing() is not None, reason=str(_tex_missing()))
@pytest.mark.parametrize("twocolumn", [False, True])
def test_the_latex_with_correlations_compiles_without_overfull_box(
        tmp_path: Path, twocolumn: bool) -> None:
    model = build_report(five_seeds(tmp_path)).model
    tex = tmp_path / "t.tex"
    tex.write_text(latex_document(model, twocolumn=twocolumn))
    assert tex.read_text().isascii()
    for _ in range(2):
        res = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                              tex.name], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, res.stdout[-3000:]
    log = tex.with_suffix(".log").read_text(encoding="latin-1")
    assert "Overfull" not in log and "LaTeX Error" not in log
    assert "Missing character" not in log and "Float too large" not in log
