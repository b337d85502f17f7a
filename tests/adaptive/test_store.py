"""The state file's record and a run's score (no launcher)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ccpo_lab.adaptive import AdaptiveDesign, AdaptiveState
from ccpo_lab.adaptive.store import DesignRecord, run_score
from ccpo_lab.errors import UserError
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.metrics import append_metrics


def test_the_record_round_trips_with_each_looks_inputs() -> None:
    design = AdaptiveDesign(comparisons=(("b", "a"),), initial_seeds=(0, 1, 2), max_seeds=6)
    scores = {"a": {0: 0.4, 1: 0.5, 2: 0.45, 9: 0.9}, "b": {0: 0.6, 1: 0.7, 2: math.nan}}
    record = DesignRecord(AdaptiveState(design), "val/success_rate", 20).advance(scores)
    assert record.inputs[0]["a"] == {0: 0.4, 1: 0.5, 2: 0.45}  # seed 9 was not assigned
    text = record.to_json()
    back = DesignRecord.from_json(text)
    assert back.to_json() == text
    assert back.state == record.state and back.metric == "val/success_rate"
    assert math.isnan(back.inputs[0]["b"][2])
    assert '"2": null' in text


def test_a_runs_score_is_its_window_mean(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "a" / "seed-0")
    for step, v in ((0, 0.1), (10, 0.3), (20, 0.5), (30, 0.7)):
        append_metrics(rd.metrics, step, {"val/success_rate": v, "other": 1.0})
    append_metrics(rd.metrics, 31, {"other": 2.0})
    assert run_score(rd, "val/success_rate", 20) == pytest.approx(0.6)
    assert math.isnan(run_score(rd, "val/success_rate", 40))
    rd.metrics.write_text('{"step": 1, "data": {}}\nnot json\n{"step": 2, "data": {}}\n')
    with pytest.raises(UserError) as e:
        run_score(rd, "val/success_rate", 20)
    assert str(rd.metrics) in str(e.value)
