"""The task-type table: each task type's id, its display name and the name it is logged by.

One row per task type the backends know (ALFWorld's six, in ALFWorld's own order, ids
1..6). The CPU backend generates and scores these types (:mod:`ccpo_lab.backends.local`),
verl-agent logs them (``val/<metric_name>_success_rate``, so an imported log names them the
same way) and the report shows one column each (:mod:`ccpo_lab.report.collect`). A run
whose metrics name a task type outside the table (another backend's) gets a column of its
own, named by its metric name (:func:`task_type_of_metric`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class TaskType:
    """One task type."""

    id: str
    """The environment's name of the type (ALFWorld's ``pick_and_place_simple``)."""
    column: str
    """Its display name: the report's column (``Pick``)."""
    metric_name: str
    """The name its metrics carry: ``<split>/<metric_name>_success_rate``."""

    def metric(self, prefix: str = "val") -> str:
        """Its success-rate metric (``val/<metric_name>_success_rate``)."""
        return f"{prefix}/{self.metric_name}_success_rate"


TASK_TYPES: tuple[TaskType, ...] = (
    TaskType("pick_and_place_simple", "Pick", "pick_and_place"),
    TaskType("look_at_obj_in_light", "Look", "look_at_obj_in_light"),
    TaskType("pick_clean_then_place_in_recep", "Clean", "pick_clean_then_place_in_recep"),
    TaskType("pick_heat_then_place_in_recep", "Heat", "pick_heat_then_place_in_recep"),
    TaskType("pick_cool_then_place_in_recep", "Cool", "pick_cool_then_place_in_recep"),
    TaskType("pick_two_obj_and_place", "Pick2", "pick_two_obj_and_place"),
)
"""ALFWorld's six task types, in ALFWorld's own order (its ``TASK_TYPES`` ids 1..6, also
the report's column order)."""

TASK_TYPE: dict[str, TaskType] = {t.id: t for t in TASK_TYPES}
"""The table by id."""

PICK, LOOK, CLEAN, HEAT, COOL, PICK_TWO = (t.id for t in TASK_TYPES)
"""The ids, for code that treats one type specially."""

TASK_METRIC_RE = re.compile(r"^val/(.+)_success_rate$")
"""A held-out per-task-type success rate (``val/success_rate`` itself is not one)."""


def task_type_of_metric(name: str) -> TaskType | None:
    """The task type whose held-out success rate ``name`` is: the table's row, or a row
    made from the name itself for a type outside the table; None when ``name`` is no
    per-task-type metric."""
    m = TASK_METRIC_RE.match(name)
    if m is None or "/" in m.group(1):
        return None
    known = next((t for t in TASK_TYPES if t.metric_name == m.group(1)), None)
    return known or TaskType(m.group(1), m.group(1), m.group(1))


# ------------------------------------------------------------------------------ WebShop
WEBSHOP_SCORE_NAME = "webshop_task_score (not success_rate)"
"""verl-agent's name of WebShop's task score (``WebshopEnvironmentManager``'s
``success_evaluator``: the environment's reward of the episode's last step, in [0, 1],
partial credit for a product matching some of the goal's attributes, options and price),
logged as ``val/<name>`` (held-out) and ``episode/<name>`` (training). The name holds
``success_rate`` but does not end with it, so :func:`task_type_of_metric` takes it for no
task type."""
WEBSHOP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("Score", f"val/{WEBSHOP_SCORE_NAME}"),
    ("Succ.", "val/success_rate"),
)
"""WebShop's task columns, (display name, metric): the mean task score (x100 in the
papers' tables) and the success rate (a purchase with score 1), held out. WebShop has no
task types; these two are what verl-agent and the GiGPO paper report for it."""
ENVIRONMENT_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {"webshop": WEBSHOP_COLUMNS}
"""Task columns of an environment that has no task types of its own (ALFWorld's come from
:data:`TASK_TYPES`)."""


def environment_columns(environment: str) -> tuple[tuple[str, str], ...]:
    """(display name, metric) of the task columns of ``environment``'s own metrics (empty
    where the columns are task types: ALFWorld)."""
    return ENVIRONMENT_COLUMNS.get(environment, ())
