"""The report's cost: per arm, in total, and what the seeds needed would cost (issue 26)."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ccpo_lab.config.yamlio import atomic_write_json
from ccpo_lab.report.analysis import build_report
from ccpo_lab.report.export import csv_tables, to_json
from ccpo_lab.report.latex import to_latex
from ccpo_lab.report.tables import to_markdown
from ccpo_lab.runs.layout import SweepDir

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=timezone.utc)
# arm, seed -> (state, attempts as (start, end) in hours from T0)
ATTEMPTS = {
    ("grpo", 0): ("completed", [(0.0, 0.1)]),
    ("grpo", 1): ("completed", [(0.0, 0.1)]),
    ("grpo", 2): ("completed", [(0.2, 0.3)]),
    ("gigpo", 0): ("completed", [(0.0, 0.2)]),
    ("gigpo", 1): ("completed", [(0.0, 0.1), (0.5, 0.6)]),  # requeued once
    ("gigpo", 2): ("completed", [(0.3, 0.5)]),
    ("ccpo-return-hard", 0): ("completed", [(0.0, 0.3)]),
    ("ccpo-return-hard", 1): ("interrupted", [(0.0, 0.15)]),
}


def _iso(hours: float) -> str:
    return (T0 + timedelta(hours=hours)).isoformat()


def _with_costs(study: Path) -> Path:
    sd = SweepDir(study)
    for (arm, seed), (state, spans) in ATTEMPTS.items():
        rd = sd.run_dir(arm, seed)
        rd.update_run(cost={"device": "CPU", "attempts": [
            {"started": _iso(a), "ended": _iso(b), "devices": 1} for a, b in spans]})
        st = rd.read_state()
        atomic_write_json(rd.state_json, {**st, "state": state, "total_steps": 30,
                                          "updated": _iso(spans[-1][1])})
    return study


@pytest.fixture
def costed(study: Path) -> Path:
    return _with_costs(study)


def test_the_cost_section_per_arm_and_in_total(costed: Path) -> None:
    model = build_report(costed).model
    c = model.cost
    assert c is not None and c.device == "CPU" and c.unit == "CPU-hours"
    rows = {a.arm: a for a in c.arms}
    assert rows["grpo"].per_run == pytest.approx(0.1) and rows["grpo"].total == \
        pytest.approx(0.3)
    assert rows["gigpo"].per_run == pytest.approx(0.2) and rows["gigpo"].attempts == 4
    # ccpo: the completed seed sets the cost per run; the interrupted one counts in the total
    ccpo = rows["ccpo-return-hard"]
    assert (ccpo.runs, ccpo.completed) == (2, 1)
    assert ccpo.per_run == pytest.approx(0.3) and ccpo.total == pytest.approx(0.45)
    assert c.total == pytest.approx(0.3 + 0.6 + 0.45) and c.runs == 8


def test_seeds_needed_become_more_device_hours(costed: Path) -> None:
    model = build_report(costed).model
    assert model.cost is not None
    per = {a.arm: a.per_run for a in model.cost.arms}
    more = {(m.arm, m.reference): m for m in model.cost.more}
    needed = [c for c in model.comparisons if c.seeds_needed is not None]
    assert needed, "the study has a seeds-needed figure"
    for c in needed:
        m = more[(c.arm, c.reference)]
        mx, my = max(0, c.seeds_needed - c.n_x), max(0, c.seeds_needed - c.n_y)
        assert (m.more_arm, m.more_reference) == (mx, my)
        assert m.device_hours == pytest.approx(mx * per[c.arm] + my * per[c.reference])
        if c.verdict == "unresolved" and (mx or my):
            assert c.verdict_text.endswith(" more CPU-hours)"), c.verdict_text
            assert "seeds needed" in c.verdict_text and "; about " in c.verdict_text


def test_every_format_shows_the_cost(costed: Path) -> None:
    model = build_report(costed).model
    md = to_markdown(model)
    assert "## cost per arm (CPU-hours)" in md
    assert "## time per phase" not in md  # no run logged timed phases
    assert "| grpo | 3 | 0.1 | 0.3 | 0:06:00 |" in md
    assert "| all arms | 8 | — | 1.35 |" in md
    assert "gigpo (4 attempts for 3 runs)" in md
    assert " CPU-h)" in md and "about N more CPU-hours" in md  # seeds needed, in device-hours
    tex = to_latex(model)
    assert r"\caption{cost per arm (CPU-hours)}" in tex and "all arms & 8" in tex
    tables = csv_tables(model)
    rows = list(csv.DictReader(io.StringIO(tables["cost"])))
    assert [r["arm"] for r in rows] == ["grpo", "gigpo", "ccpo-return-hard"]
    assert float(rows[1]["per_run"]) == pytest.approx(0.2) and rows[1]["unit"] == "CPU-hours"
    sweep = next(csv.DictReader(io.StringIO(tables["cost_sweep"])))
    assert float(sweep["total"]) == pytest.approx(1.35)
    assert "cost_more" in tables
    doc = json.loads(to_json(model))
    assert doc["cost"]["unit"] == "CPU-hours" and doc["cost"]["total"] == pytest.approx(1.35)
    assert doc["cost"]["arms"][0]["per_run"] == pytest.approx(0.1)


def test_no_recorded_cost_no_cost_section(study: Path) -> None:
    model = build_report(study).model  # the runs recorded no attempt (e.g. imported runs)
    assert model.cost is None
    assert "cost per arm" not in to_markdown(model)
    assert "cost" not in csv_tables(model)
    assert not any("more CPU-hours" in c.verdict_text for c in model.comparisons)


def test_an_adaptive_design_against_the_fixed_design(tmp_path: Path) -> None:
    from tests.adaptive.studies import ARMS, finished_study

    sweep_dir = finished_study(tmp_path)
    sd = SweepDir(sweep_dir)
    used = 0
    for rd in sd.run_dirs():  # every run: one CPU for 0.1 h (gigpo: 0.2 h)
        hours = 0.2 if rd.arm == "gigpo" else 0.1
        rd.update_run(cost={"device": "CPU", "attempts": [
            {"started": _iso(0), "ended": _iso(hours), "devices": 1}]})
        used += 1
    model = build_report(sweep_dir, {"bootstrap_reps": 500}).model
    assert model.cost is not None and model.cost.adaptive is not None
    a = model.cost.adaptive
    # 3 gigpo + 6 grpo + 6 ccpo runs used; the fixed design: 6 seeds x 3 arms
    assert (a.runs, a.fixed_runs, a.max_seeds) == (used, 18, 6) and used == 15
    assert a.device_hours == pytest.approx(3 * 0.2 + 12 * 0.1)
    assert a.fixed_device_hours == pytest.approx(6 * 0.2 + 12 * 0.1)
    assert a.saved == pytest.approx(0.6) and a.saved_fraction == pytest.approx(0.6 / 2.4)
    assert len(ARMS) == 3
    md = to_markdown(model)
    assert "the fixed design it replaces (6 seeds per arm)" in md
    assert "saved 0.6 CPU-hours (25%)" in md
    assert "cost_adaptive" in csv_tables(model)
