"""``status`` shows the device-hours used and a projection for the sweep (issue 26)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.config.yamlio import atomic_write_json
from ccpo_lab.launch.costline import cost_line, sweep_usage
from ccpo_lab.launch.status import collect_status
from ccpo_lab.runs.layout import RunDir
from tests.report.builders import init_sweep, sweep_file

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=timezone.utc)


def _iso(hours: float) -> str:
    return (T0 + timedelta(hours=hours)).isoformat()


def _sweep(tmp_path: Path) -> tuple[Path, dict]:
    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0, 1)), tmp_path / "results")
    return sweep_dir, rds


def _attempt(rd: RunDir, state: str, hours: float, devices: int = 1, step: int = 30) -> None:
    rd.update_run(cost={"device": "GPU", "attempts": [
        {"started": _iso(0), "ended": _iso(hours) if state != "running" else None,
         "devices": devices}]})
    atomic_write_json(rd.state_json, {"state": state, "step": step, "total_steps": 30,
                                      "started": _iso(0), "updated": _iso(hours)})


def test_used_and_projected(tmp_path: Path) -> None:
    sweep_dir, rds = _sweep(tmp_path)
    _attempt(rds[("grpo", 0)], "completed", 2.0, devices=8)       # 16 GPU-hours
    _attempt(rds[("grpo", 1)], "completed", 3.0, devices=8)       # 24
    _attempt(rds[("gigpo", 0)], "interrupted", 1.0, devices=8, step=10)  # 8 so far
    # gigpo seed 1: pending, nothing spent
    rows = collect_status(sweep_dir, scheduler=False)
    u = sweep_usage(rows)
    assert u is not None and u.unit == "GPU-hours"
    assert u.used == pytest.approx(48.0) and (u.completed, u.runs) == (2, 4)
    # gigpo has no completed run: its runs go at the sweep's mean completed run (20 h),
    # the interrupted one at least at what it has spent
    assert u.projected == pytest.approx(16 + 24 + 20 + 20)
    line = cost_line(rows)
    assert line == ("cost: 48.0 GPU-hours used (2 of 4 runs completed); about 80.0 GPU-hours for "
                    "the whole sweep")


def test_a_running_run_counts_to_now_and_projects_from_its_progress(tmp_path: Path) -> None:
    sweep_dir, rds = _sweep(tmp_path)
    rd = rds[("grpo", 0)]
    rd.update_run(cost={"device": "CPU", "attempts": [
        {"started": _iso(0), "ended": None, "devices": 2}]})
    atomic_write_json(rd.state_json, {"state": "running", "step": 10, "total_steps": 30,
                                      "updated": _iso(0.5)})
    rows = [r for r in collect_status(sweep_dir, scheduler=False) if r.path == rd.path]
    rows = [r.__class__(**{**r.__dict__, "state": "running"}) for r in rows]
    u = sweep_usage(rows, now=(T0 + timedelta(hours=1)).timestamp())
    assert u is not None and u.used == pytest.approx(2.0)  # 2 CPUs x 1 h, to now
    assert u.projected == pytest.approx(6.0)  # a third of the steps in 2 CPU-hours


def test_status_prints_the_cost_line_and_json_the_device_hours(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep_dir, rds = _sweep(tmp_path)
    assert main(["status", str(sweep_dir)]) == 0
    assert "cost:" not in capsys.readouterr().out  # nothing recorded yet: no line
    _attempt(rds[("grpo", 0)], "completed", 0.25, devices=1)
    assert main(["status", str(sweep_dir)]) == 0
    out = capsys.readouterr().out
    assert "cost: 0.25 GPU-hours used (1 of 4 runs completed); about 1 GPU-hours for the " \
           "whole sweep" in out
    assert main(["status", str(sweep_dir), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    by = {(r["arm"], r["seed"]): r for r in runs}
    assert by[("grpo", 0)]["device_hours"] == pytest.approx(0.25)
    assert by[("grpo", 0)]["device_unit"] == "GPU-hours"
    assert by[("gigpo", 1)]["device_hours"] is None


def test_before_any_run_completes_the_runs_under_way_project_the_rest(tmp_path: Path) -> None:
    sweep_dir, rds = _sweep(tmp_path)
    for key in (("grpo", 0), ("gigpo", 0)):  # two runs a third of the way, 1 GPU-hour each
        _attempt(rds[key], "interrupted", 1.0, devices=1, step=10)
    rows = collect_status(sweep_dir, scheduler=False)
    u = sweep_usage(rows)
    assert u is not None and u.used == pytest.approx(2.0)
    assert u.projected == pytest.approx(4 * 3.0)  # every run at 3 GPU-hours
