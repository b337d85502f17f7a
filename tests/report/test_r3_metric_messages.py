"""Reliability round 3 (issue 36): items 12 (first half) and 8 (report's part): a metric
every run logged out of range names the runs left out and why; metric names from the
runs' files are shown escaped."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.runs.metrics import append_metrics
from tests.report.builders import init_sweep, log_evals, sweep_file


def test_a_metric_every_run_logged_out_of_range_names_the_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0,)), tmp_path / "results")
    for rd in rds.values():
        append_metrics(rd.metrics, 0, {"val/success_rate": 1.7})
        append_metrics(rd.metrics, 20, {"val/success_rate": 1.5})
    assert main(["report", str(sweep_dir)]) == 2
    err = capsys.readouterr().err
    assert "not logged by any run" not in err
    assert "usable value" in err and "grpo seed 0" in err


def test_metric_names_from_files_are_shown_escaped(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0,)), tmp_path / "results")
    for rd in rds.values():
        log_evals(rd, {0: 0.25, 20: 0.5}, train_steps=range(1, 3))
        append_metrics(rd.metrics, 21, {"val/\x1b]2;pwned\x07": 0.5})
    assert main(["report", str(sweep_dir), "--metric", "val/nothing"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b]2;pwned\\x07" in err


def test_a_window_past_every_run_does_not_blame_step_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0, 1)), tmp_path / "results")
    for rd in rds.values():
        log_evals(rd, {0: 0.25, 20: 0.5}, train_steps=range(1, 21))
    assert main(["report", str(sweep_dir), "--window-start", "1000000"]) == 0
    cap = capsys.readouterr()
    assert "step-1 identity not verified" not in cap.out
    assert "no run has an evaluation at step >= 1000000 (the latest is at step 20)" in cap.out
