"""The cost of a sweep's plan: its estimate as ``--dry-run`` prints it, and the budget
check a launch makes before anything is written.

The estimate is :mod:`ccpo_lab.launch.estimate`'s, the money the launcher's price
(``launcher.price_per_device_hour``, ``launcher.currency``), the verdict
:func:`ccpo_lab.launch.budget.fits`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from ccpo_lab.config.sweep import Sweep
from ccpo_lab.errors import UserError
from ccpo_lab.launch.budget import Fit, Limit, Price, fits, limit_of, price_of, refusal
from ccpo_lab.launch.estimate import RunEstimate, StudyEstimate, estimate_study, spread_text
from ccpo_lab.launch.plan import launcher_for, sweep_needs
from ccpo_lab.textout import fmt_hours


def sweep_estimate(sw: Sweep, results: str | Path) -> StudyEstimate:
    """The estimated cost of every run of ``sw`` under ``results``."""
    launcher = launcher_for(sw, results)
    return estimate_study(sw.runs, sw.sweep_dir(results), Path(results), sweep_needs(sw),
                          launcher.placement(), sw.config.launcher.seconds_per_step)


def family_estimate(parts: Sequence[Sweep], results: str | Path) -> StudyEstimate:
    """The estimated cost of every run of a sweep over several environments (its
    :meth:`~ccpo_lab.config.sweep.Sweep.per_environment` parts): their runs together, each
    at its own environment's rate; no estimate when one environment has none."""
    ests = [sweep_estimate(p, results) for p in parts]
    rate = None if any(e.rate is None for e in ests) else ests[0].rate
    return dataclasses.replace(ests[0], rate=rate, runs=tuple(
        r for e in ests for r in e.runs) if rate is not None else ())


def _money(price: Price | None, hours: float) -> str:
    if price is None:
        return ""
    cost = price.of(hours)
    return f" = {cost:,.2f} {price.currency}" if cost >= 1 else f" = {cost:.3g} {price.currency}"


def _row(name: str, runs: list[RunEstimate], width: int) -> str:
    mean, low, high = (sum(getattr(r, k) for r in runs) for k in ("mean", "low", "high"))
    spread = f" ({fmt_hours(low)}..{fmt_hours(high)})" if high > low else ""
    steps = sum(r.steps for r in runs)
    return f"  {name:<{width}} {len(runs):>4} {steps:>6}  {fmt_hours(mean)}{spread}"


def estimate_lines(sw: Sweep, est: StudyEstimate, *, design: bool = False) -> list[str]:
    """What ``--dry-run`` prints about the study's cost: the rate and where it comes from,
    one line per arm and the study (device-hours, their range, money at the launcher's
    price), the time already spent, and the budget's verdict."""
    price = price_of(sw.config.launcher)
    if est.rate is None:
        return ["cost estimate: none (no finished run of the same model and layout in the "
                "results folder; set launcher.seconds_per_step to state a rate)"]
    r = est.rate
    secs = r.device_hours * 3600.0 / max(est.devices, 1)
    out = [f"cost estimate: {len(est.runs)} runs on {est.devices} "
           f"{est.unit.split('-')[0]}(s) each, {secs:.3g} s per step "
           f"({fmt_hours(r.device_hours)} {est.unit}) from {r.source}; {spread_text(r)}"]
    width = max([5, *(len(a) for a in est.by_arm())])
    out.append(f"  {'arm':<{width}} {'runs':>4} {'steps':>6}  {est.unit} (range)")
    out += [_row(arm, runs, width) for arm, runs in est.by_arm().items()]
    out.append(_row("study", list(est.runs), width) + _money(price, est.total))
    if est.spent:
        out.append(f"  of which spent already: {fmt_hours(est.spent)} {est.unit}"
                   + _money(price, est.spent))
    out.append(budget_line(sw, est, design=design))
    return out


def budget_line(sw: Sweep, est: StudyEstimate, *, design: bool = False) -> str:
    """``budget: 2 CPU-hours (budget.device_hours): fits, 0.41 left`` and the like."""
    limit = limit_of(sw.config.budget, price_of(sw.config.launcher), est.unit)
    if limit is None:
        return "budget: none set (budget.device_hours or budget.money)"
    head = f"budget: {limit.text} ({limit.key})"
    if design:
        return (f"{head}: the adaptive design's looks are checked by the design (the plan "
                "above is its first look)")
    fit = _fit(est, limit)
    if fit is None:
        return f"{head}: cannot be checked without an estimate"
    if not fit.ok:
        return (f"{head}: EXCEEDED, the study needs about {fmt_hours(fit.need)} {est.unit}; "
                "a launch is refused")
    risky = "; at the slowest measured rate it would not" if fit.risky else ""
    left = limit.device_hours - fit.need
    price = price_of(sw.config.launcher)
    money = _money(price, left) if price is not None else ""
    return f"{head}: fits, about {fmt_hours(left)} {est.unit}{money} left{risky}"


def _fit(est: StudyEstimate, limit: Limit) -> Fit | None:
    """:func:`fits` over the study's unfinished runs (None without an estimate)."""
    if est.rate is None:
        return None
    left = [r for r in est.runs if not r.completed]
    spent = est.spent
    need = sum(r.mean - r.spent for r in left)
    high = sum(r.high - r.spent for r in left)
    n = max(len(left), 1)
    return fits(limit, len(left), need / n, spent=spent, per_run_high=high / n)


def check_budget(sw: Sweep, results: str | Path, est: StudyEstimate | None = None) -> None:
    """Refuse (:class:`UserError`, nothing written) a fixed-design study whose estimated
    cost exceeds its budget, or whose budget cannot be checked for want of an estimate.
    An adaptive design is left to its own looks (:func:`ccpo_lab.launch.budget.fits`)."""
    if not sw.config.budget.set or sw.design is not None:
        return
    est = est if est is not None else sweep_estimate(sw, results)
    price = price_of(sw.config.launcher)
    limit = limit_of(sw.config.budget, price, est.unit)
    if limit is None:
        return
    if est.rate is None:
        raise UserError("the budget cannot be checked: no finished run of the same model "
                        "and layout in the results folder, and no launcher.seconds_per_step; "
                        "nothing was launched", key=limit.key, value=limit.text)
    if all(r.completed for r in est.runs):
        return
    fit = _fit(est, limit)
    if fit is not None and not fit.ok:
        raise refusal(limit, fit.need, est.unit, price)
