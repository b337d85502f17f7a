"""A study's budget against its estimated cost: does the plan fit?

:func:`fits` is pure (numbers in, a verdict out), for the fixed design's launch and
``--dry-run`` (:func:`refusal`) and for an adaptive design that must not start a look it
cannot pay for: it asks ``fits(budget, planned_runs, per_run, spent=...)`` before each
look. A plan fits when its **estimate** (the mean rate) stays within the budget; the
verdict also says whether the slowest measured rate would (``risky``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ccpo_lab.config.launcher import LauncherSettings
from ccpo_lab.config.schema import BudgetConfig
from ccpo_lab.errors import UserError
from ccpo_lab.textout import fmt_hours


@dataclass(frozen=True)
class Price:
    """What one device-hour costs."""

    per_device_hour: float
    """The price."""
    currency: str
    """Its currency (``USD``)."""

    def of(self, device_hours: float) -> float:
        """The money ``device_hours`` cost."""
        return device_hours * self.per_device_hour


def price_of(settings: LauncherSettings) -> Price | None:
    """The launcher's price (None when it sets none)."""
    if settings.price_per_device_hour is None or settings.currency is None:
        return None
    return Price(settings.price_per_device_hour, settings.currency)


@dataclass(frozen=True)
class Limit:
    """A budget in device-hours (the price turns a money budget into them)."""

    device_hours: float
    """The most device-hours the study may take."""
    key: str
    """The key that set it (``budget.device_hours``, ``budget.money``)."""
    text: str
    """How the user wrote it (``120 GPU-hours``, ``500 USD``)."""


def limit_of(budget: BudgetConfig, price: Price | None, unit: str = "device-hours"
             ) -> Limit | None:
    """The budget as device-hours (the tighter of both when both are set); None: none."""
    out: list[Limit] = []
    if budget.device_hours is not None:
        out.append(Limit(budget.device_hours, "budget.device_hours",
                         f"{budget.device_hours:g} {unit}"))
    if budget.money is not None and price is not None:
        out.append(Limit(budget.money / price.per_device_hour, "budget.money",
                         f"{budget.money:g} {budget.currency}"))
    return min(out, key=lambda x: x.device_hours) if out else None


@dataclass(frozen=True)
class Fit:
    """What :func:`fits` found."""

    ok: bool
    """The planned runs' estimate stays within the budget."""
    risky: bool
    """It fits at the mean rate, not at the slowest measured one."""
    need: float
    """Device-hours the study takes with the planned runs (spent included)."""
    left: float
    """Device-hours the budget leaves after what was spent."""
    affordable: int
    """How many of the planned runs the budget pays for at the mean rate."""


def fits(limit: Limit, planned_runs: int, per_run: float, *, spent: float = 0.0,
         per_run_high: float | None = None) -> Fit:
    """Whether ``planned_runs`` more runs of ``per_run`` device-hours each (the estimate;
    ``per_run_high`` at the slowest measured rate) fit in ``limit`` after ``spent``."""
    need = spent + planned_runs * per_run
    left = limit.device_hours - spent
    if per_run > 0:
        affordable = max(0, min(planned_runs, math.floor(left / per_run + 1e-9)))
    else:
        affordable = planned_runs
    high = spent + planned_runs * (per_run if per_run_high is None else per_run_high)
    ok = need <= limit.device_hours + 1e-12
    return Fit(ok, ok and high > limit.device_hours + 1e-12, need, left, affordable)


def refusal(limit: Limit, need: float, unit: str, price: Price | None) -> UserError:
    """The one-line error of a plan over budget: the key and value, and what it needs."""
    cost = price.of(need) if price is not None else 0.0
    amount = f"{cost:,.2f}" if cost >= 1 else f"{cost:.3g}"
    money = f" ({amount} {price.currency})" if price is not None else ""
    return UserError(f"the study's estimated cost, {fmt_hours(need)} {unit}{money}, exceeds "
                     f"the budget; nothing was launched", key=limit.key, value=limit.text)
