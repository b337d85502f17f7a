"""An adaptive design in MLflow: the parent run gets its looks (slow: MLflow's start-up)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adaptive.studies import finished_study

pytestmark = pytest.mark.slow


def test_the_parent_run_gets_the_looks(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    from ccpo_lab.report.analysis import build_report
    from ccpo_lab.tracking.mlflow_sync import STORE, sync_sweep

    sweep_dir = finished_study(tmp_path)
    report = build_report(sweep_dir, {"bootstrap_reps": 500}).model
    first = sync_sweep(sweep_dir, report=report)
    assert first.adaptive_looks == 2 and "the adaptive design's 2 looks" in first.summary()
    again = sync_sweep(sweep_dir, report=report)  # idempotent: no duplicated values
    client = MlflowClient(again.uri)
    parent = client.get_run(again.parent_run_id)
    tags = parent.data.tags
    assert tags["ccpo_lab.adaptive.looks"] == "2" and tags["ccpo_lab.adaptive.finished"] == "true"
    # the default design's joint family: the level in force is the family's alpha
    assert tags["ccpo_lab.adaptive.gigpo_vs_grpo"].startswith("better (look 1, family level "
                                                              "0.05, p <= ")
    assert tags["ccpo_lab.adaptive.ccpo-return-hard_vs_grpo"].startswith("unresolved (")
    p = client.get_metric_history(parent.info.run_id, "adaptive/ccpo-return-hard_vs_grpo/p")
    assert sorted(m.step for m in p) == [1, 2]
    seeds = client.get_metric_history(parent.info.run_id, "adaptive/seeds/grpo")
    assert sorted((m.step, m.value) for m in seeds) == [(1, 3.0), (2, 6.0)]
    assert "adaptive design" in tags["mlflow.note.content"]
    stored = list((sweep_dir / "mlartifacts").glob("*/artifacts/adaptive/adaptive.json"))
    assert len(stored) == 1 and stored[0].read_text() == (sweep_dir / "adaptive.json"
                                                          ).read_text()
    assert (sweep_dir / STORE).is_file()
