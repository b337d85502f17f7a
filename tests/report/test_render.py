"""Rendering helpers: number formats, LaTeX escaping, learning-curve bands, reading runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ccpo_lab.report.collect import read_config_sections, read_series
from ccpo_lab.report.latex import latex_escape
from ccpo_lab.report.plots import curve_band
from ccpo_lab.report.tables import fmt, fmt_ci
from ccpo_lab.runs.metrics import append_metrics

T975_DF1 = 12.706204736174707  # t quantile 0.975 at 1 degree of freedom


@pytest.mark.parametrize(("value", "pct", "signed", "text"), [
    (0.625, True, False, "62.5"), (0.16666, True, True, "+16.7"), (-0.05, True, True, "-5.0"),
    (10.8, False, False, "10.80"), (123.456, False, False, "123.5"), (None, True, False, "—"),
])
def test_fmt(value: float | None, pct: bool, signed: bool, text: str) -> None:
    assert fmt(value, pct, signed) == text


def test_fmt_ci_and_latex() -> None:
    assert fmt_ci([0.5, 0.75], True) == "[50.0, 75.0]"
    assert fmt_ci([None, None], True) == "—"
    assert latex_escape("val/success_rate 62.5 ± 1 & 50% #1") == \
        r"val/success\_rate 62.5 $\pm$ 1 \& 50\% \#1"


def test_curve_band() -> None:
    series = [(np.array([0, 5, 10]), np.array([0.5, 0.5, 0.25])),
              (np.array([0, 5]), np.array([0.75, 0.25]))]
    steps, mean, lo, hi = curve_band(series, 0.95)
    assert steps.tolist() == [0, 5, 10]
    assert mean.tolist() == [0.625, 0.375, 0.25]
    half = T975_DF1 * np.std([0.5, 0.75], ddof=1) / np.sqrt(2)
    assert lo[0] == pytest.approx(0.625 - half) and hi[0] == pytest.approx(0.625 + half)
    assert np.isnan(lo[2]) and np.isnan(hi[2])  # one seed at step 10: no band


def test_read_series_selects_lines_and_tolerates_a_cut_last_line(tmp_path: Path) -> None:
    p = tmp_path / "metrics.jsonl"
    append_metrics(p, 0, {"val/success_rate": 0.25})
    append_metrics(p, 1, {"episode/success_rate": 0.5})
    append_metrics(p, 5, {"val/success_rate": 0.5, "val/length/mean": 12.0})
    with p.open("a") as f:
        f.write('{"step": 6, "data": {"val/success_rate": 0.')
    series, last = read_series(p, ["val/success_rate", "val/length/mean", "val/absent"])
    assert series["val/success_rate"][0].tolist() == [0, 5]
    assert series["val/success_rate"][1].tolist() == [0.25, 0.5]
    assert series["val/length/mean"][1].tolist() == [12.0] and "val/absent" not in series
    assert last == 5
    assert read_series(tmp_path / "missing.jsonl", ["x"]) == ({}, None)


def test_read_config_sections(tmp_path: Path) -> None:
    p = tmp_path / "config.yaml"
    p.write_text("run_id: abc\nprotocol:\n  total_steps: 150\n  val_temperature: 0.4\n"
                 "backend:\n  kind: verl\n  verl:\n    model_path: m\nbackend_runtime:\n"
                 "  model_path: Qwen/Qwen2.5-7B-Instruct\nlauncher: {kind: inline}\n")
    cfg = read_config_sections(p)
    assert cfg["protocol"] == {"total_steps": 150, "val_temperature": 0.4}
    assert cfg["backend"]["kind"] == "verl"
    assert cfg["backend_runtime"]["model_path"] == "Qwen/Qwen2.5-7B-Instruct"
    p.write_text(json.dumps({"protocol": {"total_steps": 3}}))  # flow style: whole-file parse
    assert read_config_sections(p)["protocol"] == {"total_steps": 3}


def test_latex_symbols_are_math_and_ascii() -> None:
    # OT1 prints a raw '>' as an inverted question mark, '<' as an inverted exclamation
    # mark and '|' as an em dash: each becomes math
    assert latex_escape("p >= 0.05, x < 1, |z| > 2") == r"p $>$= 0.05, x $<$ 1, $|$z$|$ $>$ 2"
    assert latex_escape("step ≥ 30; −4.0 × 2 ± 1 † ‡ Δ α") == \
        r"step $\geq$ 30; $-$4.0 $\times$ 2 $\pm$ 1 $^{\dagger}$ $^{\ddagger}$ $\Delta$ $\alpha$"
    assert latex_escape("[-20.0, 23.4] and +4.0 but seed-1") == \
        "[$-$20.0, 23.4] and $+$4.0 but seed-1"
    with pytest.raises(ValueError, match="no LaTeX form"):
        latex_escape("naïve")
