"""The cost line under ``ccpo-lab status``: device-hours used and where the sweep is heading.

Used: every run's device-hours so far (:func:`ccpo_lab.runs.cost.read_cost`, from
``run.json`` alone, so a ``--watch`` refresh stays quick; a running run counts to now).
Money: at the price the runs were launched with (``launcher.price_per_device_hour`` and
``launcher.currency``, recorded in each run's ``config.yaml``), when they had one.
Projected: what the sweep will have cost when every run listed is completed, each run not
completed yet counted at its arm's observed cost per completed run (else the sweep's),
else at its own cost so far scaled to its final step, else (not started) at the mean of
the runs under way so scaled. Nothing is projected before one run has a step to go by.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ccpo_lab.launch.status import RunStatus
from ccpo_lab.runs.cost import read_cost
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.textout import fmt_hours


@dataclass(frozen=True)
class SweepUsage:
    """Device-hours of a sweep's runs."""

    unit: str
    """``GPU-hours``, ``CPU-hours`` or ``device-hours``."""
    used: float
    """Spent so far (every attempt)."""
    completed: int
    """Runs completed."""
    runs: int
    """Runs listed."""
    projected: float | None
    """The sweep's total once every run is completed (None: nothing to go by yet)."""
    per_run: dict[str, float]
    """Device-hours so far of each run (by directory)."""


def sweep_usage(rows: Sequence[RunStatus], now: float | None = None) -> SweepUsage | None:
    """The usage of the runs of ``rows`` (None when no run recorded a cost)."""
    now = time.time() if now is None else now
    spent: dict[str, float] = {}
    kinds: set[str] = set()
    for r in rows:
        cost = read_cost(RunDir(r.path), metrics=False,
                         now=now if r.state == "running" else None)
        if cost.device_hours is not None:
            spent[str(r.path)] = cost.device_hours
            if cost.device:
                kinds.add(cost.device)
    if not spent:
        return None
    done = [r for r in rows if r.state == "completed" and str(r.path) in spent]
    by_arm: dict[str, list[float]] = {}
    for r in done:
        by_arm.setdefault(r.arm, []).append(spent[str(r.path)])
    overall = [h for hs in by_arm.values() for h in hs]
    # runs under way, each scaled to its final step: what a run costs before one completes
    going = [spent[str(r.path)] * r.total / r.step for r in rows
             if r.state != "completed" and str(r.path) in spent and r.step > 0 and r.total]
    projected: float | None = 0.0
    for r in rows:
        have = spent.get(str(r.path), 0.0)
        if r.state == "completed":
            projected = None if projected is None else projected + have
            continue
        peers = by_arm.get(r.arm) or overall
        if peers:
            guess: float | None = max(have, sum(peers) / len(peers))
        elif r.step > 0 and r.total and str(r.path) in spent:
            guess = have * r.total / r.step
        elif going:
            guess = max(have, sum(going) / len(going))
        else:
            guess = None
        projected = None if projected is None or guess is None else projected + guess
    device = "+".join(sorted(kinds)) or "device"
    unit = f"{device}-hours" if device in ("GPU", "CPU") else "device-hours"
    return SweepUsage(unit, sum(spent.values()), len(done), len(rows), projected, spent)


def cost_line(rows: Sequence[RunStatus]) -> str | None:
    """``cost: 0.42 CPU-hours used (9 of 15 runs completed); about 0.71 projected for the
    sweep``; None when no run recorded a cost."""
    u = sweep_usage(rows)
    if u is None:
        return None
    text = (f"cost: {fmt_hours(u.used)} {u.unit} used ({u.completed} of {u.runs} runs "
            "completed)")
    if u.projected is not None and u.completed < u.runs:
        text += f"; about {fmt_hours(u.projected)} {u.unit} for the whole sweep"
    elif u.projected is None and u.completed < u.runs:
        text += "; no projection yet (no run completed or under way)"
    price = recorded_price(rows)
    if price is not None:
        per, cur = price
        text += f"; at {per:g} {cur} per device-hour: {money_text(u.used * per)} {cur} used"
        if u.projected is not None and u.completed < u.runs:
            text += f", about {money_text(u.projected * per)} {cur} for the sweep"
    return text


def money_text(x: float) -> str:
    """An amount of money: two decimals from 1 on, three significant digits below."""
    return f"{x:,.2f}" if x >= 1 else f"{x:.3g}"


def recorded_price(rows: Sequence[RunStatus]) -> tuple[float, str] | None:
    """``(price per device-hour, currency)`` the runs were launched with
    (:func:`price_of_runs`)."""
    return price_of_runs(r.path for r in rows)


def price_of_runs(paths: Iterable[str | Path]) -> tuple[float, str] | None:
    """``(price per device-hour, currency)`` the runs were launched with (the launcher
    settings each run's ``config.yaml`` records: ``launcher.price_per_device_hour``,
    ``launcher.currency``) of the first run that records its launcher; None without one."""
    for path in paths:
        try:
            launcher = RunDir(Path(path)).read_config().get("launcher") or {}
        except (OSError, ValueError):
            continue
        per, cur = launcher.get("price_per_device_hour"), launcher.get("currency")
        if isinstance(per, int | float) and not isinstance(per, bool) and isinstance(cur, str):
            return float(per), cur
        if launcher:  # a run launched without a price: one file read per refresh at most
            return None
    return None
