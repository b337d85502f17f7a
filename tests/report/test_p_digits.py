"""A p-value is printed with the digits its verdict needs; bootstrap resamples are bounded.

p (Holm) 0.04956 beside ``better`` at alpha 0.05 printed as ``0.050``, which reads as not
below alpha. Every place a p-value is printed (the report in markdown, LaTeX and the terminal, the
verdict's reason, the MLflow description, the adaptive design's tables against their
boundaries) prints as many decimals as it takes to read the decision off the number.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.report.analysis import build_report
from ccpo_lab.report.output import render
from ccpo_lab.report.tables import fmt_p, fmt_p_bound
from ccpo_lab.stats import p_bound_text, p_text, verdict
from tests.report.builders import demo_like_study


@pytest.mark.parametrize(("p", "alpha", "text"), [
    (0.04956, 0.05, "0.0496"), (0.05, 0.05, "0.050"), (0.0500001, 0.05, "0.050"),
    (0.04999999, 0.05, "0.04999999"), (0.2, 0.05, "0.200"), (0.0123, 0.05, "0.012"),
    (0.0004, 0.05, "<0.001"), (0.0004, 0.0005, "0.0004"), (0.0096, 0.01, "0.0096"),
    (0.0104, 0.01, "0.010"), (0.04956, None, "0.050"),
])
def test_p_reads_against_alpha_as_the_verdict_does(p: float, alpha: float | None,
                                                   text: str) -> None:
    assert p_text(p, alpha) == text
    if alpha is not None and not text.startswith("<"):
        assert (float(text) < alpha) == (p < alpha)


def test_the_verdicts_reason_and_an_adaptive_boundary() -> None:
    v = verdict(0.03, 0.04956, 3, 3, alpha=0.05)
    assert v.label == "better" and v.reason == "p_holm = 0.0496 < 0.05"
    assert verdict(0.03, 0.0004, 3, 3).reason == "p_holm < 0.001 < 0.05"
    # rejected when p <= the boundary: the boundary gains digits where 3 would mislead
    assert fmt_p_bound(0.0167, 0.01669) == ("0.017", "0.01669")
    assert fmt_p_bound(0.01669, 0.016695) == ("0.0167", "0.0167")
    assert fmt_p_bound(0.013, 0.021) == ("0.013", "0.021")
    assert fmt_p(None, 0.05) == "—"
    assert p_bound_text(0.0167, 0.01669) == ("0.017", "0.01669")   # the adaptive reason's


def test_a_p_holm_just_below_alpha_is_printed_below_alpha_in_every_format(
        tmp_path: Path) -> None:
    study = demo_like_study(tmp_path, tmp_path / "results")
    report = build_report(study, {"bootstrap_reps": 500})
    model = report.model
    first = model.comparisons[0]
    near = dataclasses.replace(first, p_holm=0.04956, p=0.01239, verdict="better")
    model = dataclasses.replace(model, comparisons=(near, *model.comparisons[1:]))
    for fmt in ("md", "latex"):        # the CSV and JSON carry the unrounded value
        text = render(model, fmt)
        row = next(line for line in text.splitlines() if first.arm in line and "0.0496" in line)
        assert "0.050" not in row.replace("0.0500", "-"), (fmt, row)
    from ccpo_lab.tracking.mlflow_sync import description

    text = description({"arms": [], "seeds": []}, "demo", model)
    assert "| 0.0496 | better |" in text


def test_bootstrap_resamples_have_an_upper_bound(
        tmp_path: Path, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = demo_like_study(tmp_path, tmp_path / "results")
    assert main(["report", str(study), "--bootstrap-reps", "1000000000"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: --bootstrap-reps: must be an integer from 100 to 1,000,000 (more "
                   "resamples change no interval visibly and cost minutes and memory) (got "
                   "1000000000)")
    assert main(["sweep", str(workdir / "sweeps" / "smoke.yaml"),
                 "analysis.bootstrap_reps=2000000", "--dry-run",
                 "--results", str(tmp_path / "r")]) == 2
    assert "analysis.bootstrap_reps: out of range (got 2000000); valid: [100, 1000000]" in \
        capsys.readouterr().err
