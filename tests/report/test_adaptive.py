"""The report of an adaptive sweep: its looks, and verdicts taken from the design."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ccpo_lab.report.adaptive import apply_design
from ccpo_lab.report.analysis import Report, build_report
from ccpo_lab.report.export import csv_tables, to_json
from ccpo_lab.report.latex import to_latex
from ccpo_lab.report.tables import to_markdown
from tests.adaptive.studies import finished_study


@pytest.fixture(scope="module")
def adaptive_report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return build_report(finished_study(tmp_path_factory.mktemp("adaptive")),
                        {"bootstrap_reps": 500})


def test_the_model_holds_the_looks_and_the_design_verdicts(adaptive_report: Report) -> None:
    a = adaptive_report.model.adaptive
    assert a is not None and a.finished and a.max_seeds == 6
    assert a.seeds == ({"gigpo": 3, "grpo": 3, "ccpo-return-hard": 3},
                       {"gigpo": 3, "grpo": 6, "ccpo-return-hard": 6})
    assert [(r.look, r.arm, r.action) for r in a.looks] == [
        (1, "gigpo", "better"), (1, "ccpo-return-hard", "continue"),
        (2, "ccpo-return-hard", "unresolved")]
    first = a.looks[0]
    # the joint family (issue 31): the level is alpha, the boundary the max-|t| one of the
    # 2 open comparisons (Holm's alpha / 2 before)
    assert first.level == 0.05 and first.nominal is not None and first.p is not None
    assert "joint boundary of 2 open comparison(s)" in first.reason
    assert first.p <= first.nominal  # rejected at its boundary
    v = {r.arm: r for r in a.verdicts}
    assert v["gigpo"].look == 1 and v["ccpo-return-hard"].look == 2
    rows = {c.arm: c for c in adaptive_report.model.comparisons}
    assert rows["gigpo"].adaptive and rows["gigpo"].verdict == "better"
    assert rows["gigpo"].p_holm is None and rows["gigpo"].reason.startswith(
        "adaptive design, look 1:")
    ccpo = rows["ccpo-return-hard"]
    assert ccpo.adaptive and ccpo.verdict == "unresolved"
    assert ccpo.verdict_text == v["ccpo-return-hard"].verdict_text
    assert ccpo.seeds_needed == v["ccpo-return-hard"].seeds_needed


def test_every_format_shows_the_design(adaptive_report: Report) -> None:
    model = adaptive_report.model
    md = to_markdown(model)
    for title in ("adaptive design: verdicts with their adjusted thresholds",
                  "adaptive design: decisions at each look",
                  "adaptive design: seeds per arm at each look"):
        assert f"## {title}" in md
    assert "| gigpo vs grpo | better | 1 | 3/3 |" in md
    assert "decided by the adaptive design" in md
    tex = to_latex(model)
    assert tex.isascii() and "tab:ccpo-adaptive_looks" in tex
    doc = json.loads(to_json(model))
    assert [r["action"] for r in doc["adaptive"]["looks"]] == ["better", "continue",
                                                              "unresolved"]
    assert doc["comparisons"][0]["adaptive"] is True
    tables = csv_tables(model)
    assert tables["adaptive_looks"].splitlines()[0].startswith("look,arm,baseline,n_x,n_y,")
    assert len(tables["adaptive_looks"].splitlines()) == 4
    assert "alpha_spent" in tables["adaptive_looks"].splitlines()[0]
    assert tables["adaptive_seeds"].splitlines()[1:4] == ["1,gigpo,3,False", "1,grpo,3,False",
                                                         "1,ccpo-return-hard,3,False"]


def test_another_metric_or_window_keeps_the_fixed_sample_verdicts(
        adaptive_report: Report) -> None:
    rep = build_report(adaptive_report.sweep_dir, {"bootstrap_reps": 500, "window_start": 25})
    assert not any(c.adaptive for c in rep.model.comparisons)
    assert rep.model.adaptive is not None  # the looks are still shown
    assert any("the adaptive design decided on val/success_rate (window step >= 20)" in n.text
               for n in rep.model.notes)


def test_the_design_overrides_a_naive_retest(adaptive_report: Report) -> None:
    """A row the fixed-sample test calls better takes the design's unresolved."""
    model, s = adaptive_report.model, adaptive_report.settings
    a = model.adaptive
    assert a is not None
    naive = tuple(dataclasses.replace(c, adaptive=False, verdict="better",
                                      verdict_text="better", p_holm=0.01)
                  for c in model.comparisons)
    rows, notes = apply_design(naive, a, s)
    ccpo = next(r for r in rows if r.arm == "ccpo-return-hard")
    assert (ccpo.verdict, ccpo.p_holm, ccpo.adaptive) == ("unresolved", None, True)
    assert notes == []
    assert apply_design(naive, None, s) == (naive, [])
    other = dataclasses.replace(s, alpha=0.1)
    assert "its alpha 0.05" in apply_design(naive, a, other)[1][0].text


def test_a_fixed_sweep_has_no_design(study: Path) -> None:
    model = build_report(study, {"bootstrap_reps": 500}).model
    assert model.adaptive is None and not any(c.adaptive for c in model.comparisons)
    assert "adaptive" not in to_markdown(model) and "adaptive_looks" not in csv_tables(model)
    assert json.loads(to_json(model))["adaptive"] is None


def test_the_seeds_table_names_the_rule_and_flags_unequal_spreads(
        adaptive_report: Report) -> None:
    a = adaptive_report.model.adaptive
    assert a is not None
    assert (a.test, a.family, a.statistic, a.variance) == ("paired", "joint", "mean", "own")
    lo, hi = a.spread
    assert lo is not None and hi is not None and 0 < lo <= hi
    md = to_markdown(adaptive_report.model)
    assert "Holm across comparisons" not in md
    assert "(group-sequential boundaries, the joint step-down across comparisons" in md
    a = dataclasses.replace(a, variance="pooled")
    md = to_markdown(dataclasses.replace(adaptive_report.model, adaptive=a))
    assert "the joint max-statistic step-down across the comparisons with one reference " \
           "(the mean's t; a variance pooled over the family)" in md
    # the pooled variance's assumption strained: a 3-fold spread gets the note; own
    # variances, or alike spreads, do not
    wide = dataclasses.replace(a, spread=(1.0, 3.0))
    text = to_markdown(dataclasses.replace(adaptive_report.model, adaptive=wide))
    assert "vary 3.0-fold across seeds (sd 1 to 3)" in text and "variance: own" in text
    for other in (dataclasses.replace(wide, variance="own"),
                  dataclasses.replace(a, spread=(1.0, 1.5))):
        md = to_markdown(dataclasses.replace(adaptive_report.model, adaptive=other))
        assert "-fold across seeds" not in md
    own = to_markdown(dataclasses.replace(adaptive_report.model, adaptive=dataclasses.replace(
        a, variance="own", statistic="mean-or-rank", test="unpaired")))
    assert "(the smaller of the mean's p and 4 times the ranks' p; each comparison's own " \
           "variance)" in own
