"""The report's raw values: the JSON document and the CSV tables, from the typed model.

JSON is :func:`ccpo_lab.report.model.to_plain` of the model (no NaN: undefined values are
null). Each CSV table's header comes from its row type's fields
(:func:`ccpo_lab.report.model.csv_header`), prefixed by the key columns; values are in the
metric's own units (fractions for success rates).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from ccpo_lab.report.evaluation import (
    EvalArmRow,
    EvalComparisonRow,
    EvalReferenceComparison,
    EvalReferenceRow,
    SelectionRow,
    VarianceRow,
)
from ccpo_lab.report.model import (
    AdaptiveCostRow,
    AdaptiveLookRow,
    AdaptiveVerdictRow,
    ArmRow,
    ComparisonRow,
    CostArmRow,
    MoreCostRow,
    ReportModel,
    RiseRow,
    SeedRow,
    TaskStat,
    csv_header,
    csv_row,
    to_plain,
)
from ccpo_lab.report.numbers import NO_INTERVAL


def to_json(model: ReportModel, indent: int | None = None) -> str:
    """The report document as JSON; compact by default."""
    seps = (",", ":") if indent is None else (",", ": ")
    return json.dumps(to_plain(model), indent=indent, separators=seps, allow_nan=False) + "\n"


def _csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows([["" if v is None else v for v in row] for row in rows])
    return buf.getvalue()


def csv_tables(model: ReportModel) -> dict[str, str]:
    """``{"arms", "comparisons", "per_task", "per_seed"}`` -> CSV text.

    * arms: :class:`ArmRow` fields, ``reference``, then the :class:`RiseRow` fields as
      ``rise_*``;
    * comparisons: :class:`ComparisonRow` fields;
    * per_task: ``arm``, ``column``, then :class:`TaskStat` fields (published baselines
      as ``<method> (published)`` rows when shown);
    * per_seed: ``arm``, ``seed``, then :class:`SeedRow` fields;
    * with an adaptive design, :func:`adaptive_csv`'s tables;
    * with checkpoint evaluations, :func:`evaluation_csv`'s;
    * when the runs recorded their cost, :func:`cost_csv`'s tables.
    """
    arms = _csv([*csv_header(ArmRow), "reference", *csv_header(RiseRow, "rise_")],
                [[*csv_row(a), a.arm == model.reference, *csv_row(a.rise)] for a in model.arms])
    comparisons = _csv(csv_header(ComparisonRow), [csv_row(c) for c in model.comparisons])
    task_rows = [[a.arm, col, *csv_row(st)] for a in model.arms for col, st in a.per_task.items()]
    if model.baselines.shown:
        task_rows += [[f"{r.method} (published)", col,
                       *csv_row(TaskStat(mean=v, sd=None, ci_t=NO_INTERVAL, n_seeds=3))]
                      for r in model.baselines.rows for col, v in r.per_task.items()]
    per_task = _csv(["arm", "column", *csv_header(TaskStat)], task_rows)
    per_seed = _csv(["arm", "seed", *csv_header(SeedRow)],
                    [[a.arm, k, *csv_row(e)] for a in model.arms for k, e in a.per_seed.items()])
    return {"arms": arms, "comparisons": comparisons, "per_task": per_task,
            "per_seed": per_seed, **adaptive_csv(model), **evaluation_csv(model),
            **cost_csv(model)}


def cost_csv(model: ReportModel) -> dict[str, str]:
    """The cost tables ({} when no run recorded a cost): ``cost`` (:class:`CostArmRow`
    fields, device-hours in ``unit``), ``cost_sweep`` (device, unit, total, runs),
    ``cost_more`` (:class:`MoreCostRow`) and, for an adaptive design, ``cost_adaptive``
    (:class:`AdaptiveCostRow`)."""
    c = model.cost
    if c is None:
        return {}
    out = {"cost": _csv([*csv_header(CostArmRow), "unit"],
                        [[*csv_row(a), c.unit] for a in c.arms]),
           "cost_sweep": _csv(["device", "unit", "total", "runs"],
                              [[c.device, c.unit, c.total, c.runs]]),
           "cost_more": _csv([*csv_header(MoreCostRow), "unit"],
                             [[*csv_row(m), c.unit] for m in c.more])}
    if c.adaptive is not None:
        out["cost_adaptive"] = _csv([*csv_header(AdaptiveCostRow), "unit"],
                                    [[*csv_row(c.adaptive), c.unit]])
    return out


def adaptive_csv(model: ReportModel) -> dict[str, str]:
    """The adaptive design's tables ({} for fixed seeds): ``adaptive_looks``
    (:class:`AdaptiveLookRow` fields), ``adaptive_verdicts`` (:class:`AdaptiveVerdictRow`)
    and ``adaptive_seeds`` (``look, arm, seeds``; a look in progress has ``assigned``
    true)."""
    a = model.adaptive
    if a is None:
        return {}
    n_done = len(a.seeds) - (0 if a.finished else 1)
    seeds = [[k + 1, arm, n, k >= n_done] for k, look in enumerate(a.seeds)
             for arm, n in look.items()]
    return {"adaptive_looks": _csv(csv_header(AdaptiveLookRow), [csv_row(r) for r in a.looks]),
            "adaptive_verdicts": _csv(csv_header(AdaptiveVerdictRow),
                                      [csv_row(r) for r in a.verdicts]),
            "adaptive_seeds": _csv(["look", "arm", "seeds", "assigned"], seeds)}


def evaluation_csv(model: ReportModel) -> dict[str, str]:
    """The checkpoint evaluations' tables ({} without any): ``eval_arms`` and
    ``eval_comparisons`` (the group's ``split, checkpoint, games, repeats, temperature,
    draw_id``, then the row's fields), ``eval_variance`` (:class:`VarianceRow`, the window's
    rows included), ``eval_selection`` (:class:`SelectionRow`) and, with reference
    policies, ``eval_references`` and ``eval_reference_comparisons``."""
    ev = model.evaluation
    if ev is None:
        return {}
    key = ["split", "checkpoint", "games", "repeats", "temperature", "draw_id"]

    def group_key(g: Any) -> list[Any]:
        return [g.split, g.checkpoint, g.games, g.repeats, g.temperature, g.draw_id]

    return {
        "eval_arms": _csv([*key, *csv_header(EvalArmRow)],
                          [[*group_key(g), *csv_row(a)] for g in ev.groups for a in g.arms]),
        "eval_comparisons": _csv([*key, *csv_header(EvalComparisonRow)],
                                 [[*group_key(g), *csv_row(c)] for g in ev.groups
                                  for c in g.comparisons]),
        "eval_variance": _csv(csv_header(VarianceRow),
                              [csv_row(r) for g in ev.groups for r in g.variance]
                              + [csv_row(r) for r in ev.window]),
        "eval_selection": _csv(csv_header(SelectionRow), [csv_row(r) for r in ev.selection]),
    } | ({} if not any(g.references for g in ev.groups) else {
        "eval_references": _csv([*key, *csv_header(EvalReferenceRow)],
                                [[*group_key(g), *csv_row(r)] for g in ev.groups
                                 for r in g.references]),
        "eval_reference_comparisons": _csv(
            [*key, *csv_header(EvalReferenceComparison)],
            [[*group_key(g), *csv_row(c)] for g in ev.groups for c in g.reference_comparisons]),
    })


def to_csv(model: ReportModel) -> str:
    """The CSV tables, each after a ``# <name>`` line, separated by blank lines."""
    return "\n".join(f"# {name}\n{text}" for name, text in csv_tables(model).items())
