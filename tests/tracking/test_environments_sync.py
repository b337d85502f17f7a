"""Sync of a sweep over several environments: every run tagged with its environment, one
parent per environment, into the same store and experiment when one is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.runs.family import tracking_group
from tests.report.test_across_report import _family


def test_environment_tags_and_parents(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    from mlflow.tracking import MlflowClient

    folder = _family(tmp_path)
    uri = f"sqlite:///{tmp_path / 'one.db'}"
    assert main(["sync", str(folder), "--uri", uri]) == 0
    err = capsys.readouterr().err
    assert "== environment alfworld" in err and "== environment sokoban" in err
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("envs")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    children = [r for r in runs if r.data.tags.get("ccpo_lab.kind") == "run"]
    parents = [r for r in runs if r.data.tags.get("ccpo_lab.kind") == "sweep"]
    assert len(children) == 2 * 4 * 6
    assert sorted({r.data.tags["ccpo_lab.environment"] for r in children}) == [
        "alfworld", "sokoban"]
    assert sorted(p.data.tags["ccpo_lab.sweep"] for p in parents) == [
        "envs/alfworld", "envs/sokoban"]
    by_parent = {p.info.run_id: p.data.tags["ccpo_lab.sweep"] for p in parents}
    for r in children:
        assert by_parent[r.data.tags["mlflow.parentRunId"]].endswith(
            "/" + r.data.tags["ccpo_lab.environment"])


def test_tracking_group(tmp_path: Path) -> None:
    folder = _family(tmp_path)
    assert tracking_group("envs", folder / "sokoban") == "envs/sokoban"
    assert tracking_group("envs", tmp_path) == "envs"
