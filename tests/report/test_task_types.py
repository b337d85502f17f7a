"""The per-task-type table's columns come from the task-type table and the runs."""

from __future__ import annotations

from pathlib import Path

from ccpo_lab.report.analysis import build_report
from ccpo_lab.report.collect import TASK_COLUMNS
from ccpo_lab.report.export import csv_tables
from ccpo_lab.report.tables import per_task_table
from ccpo_lab.runs.tasks import TASK_TYPES, task_type_of_metric
from tests.report.builders import init_sweep, log_evals, sweep_file

EVALS = {0: 0.25, 10: 0.25, 20: 0.5, 25: 0.5, 30: 0.5}


def test_a_task_type_outside_alfworlds_six_gets_a_column(tmp_path: Path) -> None:
    """Runs of a backend whose metrics name another task type (``stack_blocks``) report
    it in a column of its own, after the table's six."""
    p = sweep_file(tmp_path, arms=("grpo", "gigpo"), seeds=(0, 1))
    _, sweep_dir, rds = init_sweep(p, tmp_path / "results")
    for (arm, _seed), rd in rds.items():
        log_evals(rd, EVALS, tasks={s: (0.5,) * 6 for s in EVALS},
                  extra={"val/stack_blocks_success_rate": 0.25 if arm == "grpo" else 0.75})
    model = build_report(sweep_dir).model
    assert model.task_columns == (*TASK_COLUMNS[:6], "stack_blocks", "All", "Turns")
    assert model.arm("grpo").per_task["stack_blocks"].mean == 0.25
    assert model.arm("gigpo").per_task["stack_blocks"].mean == 0.75
    table = per_task_table(model)
    assert [c.title for c in table.columns][-2:] == ["stack_blocks", "All"]
    assert "stack_blocks" in csv_tables(model)["per_task"]


def test_the_table_names_alfworlds_six_once() -> None:
    """The CPU backend's types, its logged names and the report's columns are one table."""
    from ccpo_lab.backends.local.catalog import TASK_TYPES as GENERATED
    from ccpo_lab.backends.local.prompts import TASK_METRIC_NAMES

    assert tuple(t.id for t in TASK_TYPES) == GENERATED
    assert {t.id: t.metric_name for t in TASK_TYPES} == TASK_METRIC_NAMES
    assert TASK_COLUMNS[:6] == tuple(t.column for t in TASK_TYPES)
    assert task_type_of_metric("val/pick_and_place_success_rate") == TASK_TYPES[0]
    assert task_type_of_metric("val/success_rate") is None
