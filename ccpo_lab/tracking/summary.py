"""The numbers each tracked run carries besides its history: the report's per-run summary
and the run's cost, computed by the report's own code (so they are the report's numbers).

* ``summary/*`` (:func:`summary_values`): the converged-window mean, its sd and count, the
  first held-out evaluation, the best evaluation in the window with its step and the
  upward bias a best of ``n`` noisy evaluations carries, the window's start;
  :data:`WINDOW_MEAN` is the number to read (MLflow's grouped view averages it over an
  arm's seeds: the report's arm mean);
* ``cost/*`` (:func:`cost_values`): device-hours, wall hours, attempts, peak memory and
  throughput (:mod:`ccpo_lab.runs.cost`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ccpo_lab.errors import UserError
from ccpo_lab.report.settings import resolve_settings
from ccpo_lab.runs.cost import read_cost
from ccpo_lab.runs.sweep_runs import read_sweep_config

if TYPE_CHECKING:
    from ccpo_lab.report.settings import ReportSettings
    from ccpo_lab.runs.cost import RunCost
    from ccpo_lab.runs.layout import FoundRun, RunDir

WINDOW_MEAN = "summary/window_mean"
"""The number to read for a run: its mean held-out value over the converged window."""


def summary_settings(manifest: Mapping[str, Any], arms: Sequence[str]) -> ReportSettings | None:
    """The report's settings from the sweep's ``analysis`` (None: no arm yet, or settings
    the report would refuse)."""
    if not arms:
        return None
    try:
        settings, _ = resolve_settings(manifest, list(arms))
    except UserError:
        return None
    return settings


def summary_values(found: FoundRun, settings: ReportSettings) -> dict[str, float]:
    """``summary/*`` of one run (only the defined values; {} for a run the report leaves
    out)."""
    from ccpo_lab.report.analysis import run_summary
    from ccpo_lab.report.collect import load_run

    data = load_run(found, [settings.metric])
    if data.error:
        return {}
    row = run_summary(data, settings)
    values = {WINDOW_MEAN: row.mean, "summary/window_sd": row.sd,
              "summary/n_evals": row.n_evals, "summary/window_start": settings.window_start,
              "summary/first": row.start, "summary/first_step": row.start_step,
              "summary/best": row.best, "summary/best_step": row.best_step,
              "summary/best_bias": row.best_bias}
    return defined(values)


def cost_values(cost: RunCost) -> dict[str, float]:
    """``cost/*`` of one run (only the defined values)."""
    values: dict[str, Any] = {"cost/device_hours": cost.device_hours,
                              "cost/wall_hours": cost.wall_s / 3600.0 if cost.attempts else None,
                              "cost/attempts": cost.attempts, "cost/devices": cost.devices,
                              "cost/peak_memory_gb": cost.peak_memory_gb,
                              "cost/throughput": cost.throughput}
    values.update({f"cost/phase_hours/{k}": v / 3600.0 for k, v in cost.phases.items()})
    return defined(values) if cost.attempts or cost.phases else {}


def defined(values: Mapping[str, Any]) -> dict[str, float]:
    """The values that are finite numbers, as floats (None, booleans, nan left out)."""
    out = {}
    for k, v in values.items():
        if v is None or isinstance(v, bool):
            continue
        f = float(v)
        if math.isfinite(f):
            out[k] = f
    return out


def final_summary(rd: RunDir) -> dict[str, float]:
    """A run's ``summary/*`` and ``cost/*`` (this module) for its W&B
    summary at the end of its training (its attempt counted to now), with the sweep's
    analysis settings (``summary/*`` left out when they cannot be computed)."""
    import time

    from ccpo_lab.runs.layout import FoundRun  # noqa: F811 (at run time)

    manifest = read_sweep_config(rd.path.parent.parent)
    arms = [a for a in manifest.get("arms") or [] if isinstance(a, str)] or [rd.arm]
    settings = summary_settings(manifest, arms)
    out = cost_values(read_cost(rd, now=time.time()))  # the run's attempt goes on: to now
    if settings is not None and rd.seed is not None:
        out.update(summary_values(FoundRun(rd.arm, rd.seed, rd.path, rd.suffix), settings))
    return out
