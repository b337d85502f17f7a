"""An adaptive design within a study's budget: never start a look it cannot pay for.

Before the runs of a look are launched (the first look's listed seeds included),
:func:`look_over_budget` estimates what the study will have cost once they are done (the
assigned runs' estimate: what completed runs took, in-flight ones at the mean rate to
their end, the look's new runs at the mean rate; :mod:`ccpo_lab.launch.estimate`) and
compares it with ``budget`` (:func:`ccpo_lab.launch.budget.fits`). When it does not fit,
the look is not launched: the design stops there, and says which comparisons the budget
left open and what finishing them (every open arm and the reference to ``max_seeds``)
would cost. Raising the budget and running the same command again launches the look.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from ccpo_lab.adaptive.store import DesignRecord
from ccpo_lab.config.sweep import Sweep
from ccpo_lab.launch.budget import fits, limit_of, price_of
from ccpo_lab.launch.costplan import sweep_estimate
from ccpo_lab.textout import fmt_hours


def open_runs_to_finish(record: DesignRecord, assigned: dict[str, tuple[int, ...]]
                        ) -> tuple[list[str], int]:
    """The open comparisons (``arm vs reference``) and the runs that would take each open
    arm and the reference to ``max_seeds`` beyond those assigned."""
    state = record.state
    closed = {k for k, d in state.last_decisions().items() if d.closed}
    keys = [k for k in state.design.comparisons if k not in closed]
    arms = {a for a, _ in keys} | {b for _, b in keys}
    more = sum(max(0, state.design.max_seeds - len(assigned.get(a, ()))) for a in arms)
    return [f"{a} vs {b}" for a, b in keys], more


def look_over_budget(sw: Sweep, expanded: Sweep, assigned: Collection[tuple[str, int]],
                     results: Path, record: DesignRecord, new: Collection[tuple[str, int]]
                     ) -> list[str] | None:
    """Why the look's ``new`` runs are not launched (the lines to print), or None when
    they fit or the study sets no budget. ``expanded``: the sweep with every assigned
    seed, ``assigned``: the runs of the design so far (whose cost counts)."""
    budget = sw.config.budget
    if not budget.set or not new:
        return None
    est = sweep_estimate(expanded, results)
    price = price_of(sw.config.launcher)
    limit = limit_of(budget, price, est.unit)
    if limit is None:
        return None
    look = len(record.state.looks) + 1
    if est.rate is None:
        return [f"budget: look {look} is not launched: no cost estimate to check it against "
                f"{limit.key} (no finished run of the same model and layout under the "
                "results folder; set launcher.seconds_per_step)"]
    per_run = est.rate.device_hours * sw.config.protocol.total_steps
    others = sum(r.mean for r in est.runs
                 if (r.arm, r.seed) in set(assigned) and (r.arm, r.seed) not in set(new))
    fit = fits(limit, len(new), per_run, spent=others)
    if fit.ok:
        return None
    opened, more = open_runs_to_finish(record, record.state.assigned_seeds())
    cost = (len(new) + more) * per_run
    money = f" = {price.of(cost):.3g} {price.currency}" if price is not None else ""
    return [f"budget: look {look}'s {len(new)} run(s) would bring the study to about "
            f"{fmt_hours(fit.need)} {est.unit}, over {limit.key} = {limit.text} "
            f"({fmt_hours(max(fit.left, 0.0))} left): the look is not launched, the design "
            "stops within its budget",
            f"left open by the budget: {', '.join(opened) or 'none'}; finishing them (to "
            f"max_seeds, {len(new) + more} more run(s)) would cost about {fmt_hours(cost)} "
            f"{est.unit}{money}; raise the budget and run the same command to go on"]
