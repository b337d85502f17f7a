"""The cross-environment section in MLflow: on each environment's parent run, as metrics
``across/<arm>_vs_<reference>/...`` and verdict tags ``ccpo_lab.across.<comparison>``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.report.across import AcrossSection, CrossRow, EnvCell
from ccpo_lab.stats.across import Interaction
from ccpo_lab.tracking.across import ENVIRONMENTS_TAG, across_metrics, across_tags
from tests.report.test_across_report import _family


def _section() -> AcrossSection:
    cells = (EnvCell("alfworld", 0.1, (0.05, 0.15), 0.01, "better", 4),
             EnvCell("sokoban", -0.1, (-0.15, -0.05), 0.01, "worse", 4))
    it = Interaction("paired t", 0.2, (0.1, 0.3), 5.0, (3.0,), 0.01, 4)
    rows = (CrossRow("ccpo", "grpo", cells, "disagree", it, True, 0.02, "differs", ""),
            CrossRow("gigpo", "grpo", (cells[0], EnvCell("sokoban", None, (None, None), None,
                                                         "absent", 0)),
                     "-", None, False, None, "unresolved", ""))
    return AcrossSection(("alfworld", "sokoban"), "val/success_rate", 0.95, 0.05, rows, ())


def test_metrics_and_tags() -> None:
    m, t = across_metrics(_section()), across_tags(_section())
    assert m == {"across/ccpo_vs_grpo/interaction": 0.2,
                 "across/ccpo_vs_grpo/interaction_ci_low": 0.1,
                 "across/ccpo_vs_grpo/interaction_ci_high": 0.3,
                 "across/ccpo_vs_grpo/interaction_p": 0.01,
                 "across/ccpo_vs_grpo/interaction_p_holm": 0.02,
                 "across/ccpo_vs_grpo/directions_agree": 0.0,
                 "across/ccpo_vs_grpo/n_environments": 2.0,
                 "across/gigpo_vs_grpo/n_environments": 1.0}
    assert t == {"ccpo_lab.across.ccpo_vs_grpo": "differs",
                 "ccpo_lab.across.gigpo_vs_grpo": "unresolved",
                 ENVIRONMENTS_TAG: "alfworld,sokoban"}


def test_report_logs_the_section_on_each_parent(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    folder = _family(tmp_path)
    uri = f"sqlite:///{tmp_path / 'one.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert main(["report", str(folder), "--out", str(tmp_path / "out")]) == 0
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("envs")
    assert exp is not None
    parents = [r for r in client.search_runs([exp.experiment_id], max_results=1000)
               if r.data.tags.get("ccpo_lab.kind") == "sweep"]
    assert sorted(p.data.tags["ccpo_lab.sweep"] for p in parents) == [
        "envs/alfworld", "envs/sokoban"]
    for p in parents:
        assert p.data.tags[ENVIRONMENTS_TAG] == "alfworld,sokoban"
        assert p.data.tags["ccpo_lab.across.gigpo_vs_grpo"] == "holds"
        assert p.data.tags["ccpo_lab.across.ccpo-return-hard_vs_grpo"] == "differs"
        key = "across/ccpo-return-hard_vs_grpo/interaction"
        assert 0.25 < p.data.metrics[key] < 0.35  # 0.15 - (-0.15)
        assert p.data.metrics["across/gigpo_vs_grpo/directions_agree"] == 1.0


def test_wandb_config_names_the_environment(tmp_path: Path) -> None:
    from ccpo_lab.runs.layout import RunDir
    from ccpo_lab.tracking.wandb_sync import wandb_config

    folder = _family(tmp_path)
    for env in ("alfworld", "sokoban"):
        rd = RunDir(folder / env / "gigpo" / "seed-0")
        config = wandb_config(rd, rd.read_run())
        assert config["environment_name"] == env and config["arm"] == "gigpo"
    old = RunDir(folder / "alfworld" / "grpo" / "seed-1")
    run = {k: v for k, v in old.read_run().items() if k != "environment"}
    assert wandb_config(old, run)["environment_name"] == "alfworld"  # written before
