"""Reliability round 3 (issue 36), item 9: a results path with ``?``, ``#``, ``%20`` or a
space keeps its MLflow store inside the sweep (real MLflow, sqlite)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.tracking.mlflow_sync import default_uri
from ccpo_lab.tracking.store import sqlite_path
from tests.report.builders import init_sweep, log_evals, sweep_file


@pytest.mark.parametrize("name", ["a#b?c%20d e", "plain"])
def test_the_default_store_lies_in_the_sweep_whatever_its_path(tmp_path: Path,
                                                                name: str) -> None:
    results = tmp_path / name
    _, sweep_dir, _ = init_sweep(sweep_file(tmp_path, seeds=(0,)), results)
    uri = default_uri(sweep_dir)
    assert sqlite_path(uri) == sweep_dir.resolve() / "mlflow.db"


@pytest.mark.slow
def test_sync_writes_its_store_inside_a_sweep_with_odd_characters(tmp_path: Path) -> None:
    from ccpo_lab.tracking.mlflow_sync import sync_sweep

    results = tmp_path / "r#1?x%20y z"
    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0,)), results)
    for rd in rds.values():
        log_evals(rd, {0: 0.25, 5: 0.5}, train_steps=range(1, 6))
    res = sync_sweep(sweep_dir)
    assert res.created == 2
    assert (sweep_dir / "mlflow.db").is_file()
    assert not list(tmp_path.glob("r#1*mlflow*")) and not (tmp_path / "r").exists()
    assert sync_sweep(sweep_dir).up_to_date == 2
