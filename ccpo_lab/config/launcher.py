"""The base of every launcher's typed settings (the ``launcher`` section of a sweep file).

Each launcher kind (:mod:`ccpo_lab.config.launchers.kinds`) has its own frozen dataclass of
settings, subclassing :class:`LauncherSettings`, one docstring per field. A sweep's ``launcher``
section is ``kind`` plus that kind's keys, flat (``launcher.partition=gpu`` on the command
line); a key of another kind is an error listing the valid ones. Queueing details: never
part of a run's identity.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

Where = Callable[[str], "str | None"]
"""``where(key_path)``: the file (or ``command line``) a key came from."""


@dataclass(frozen=True)
class LauncherSettings:
    """Settings of one launcher kind; subclasses add their fields (each with a docstring)."""

    kind: str = field(default="", init=False)
    """The launcher's registry name (fixed by each subclass; a user sets it as
    ``launcher.kind`` or ``launcher=KIND``)."""

    seconds_per_step: float | None = None
    """Wall seconds one training step of a run takes under this launcher (start-up and
    evaluations included), the cost estimate's rate when no finished run of the same
    model and layout is in the results folder (``sweep --dry-run``, :doc:`docs/cost.md`)."""
    price_per_device_hour: float | None = None
    """What one device-hour (GPU-hour, CPU-hour) costs under this launcher, in
    ``currency``: turns the estimate's device-hours into money."""
    currency: str | None = None
    """The price's currency (three letters: ``USD``, ``EUR``); required with a price."""

    moved: ClassVar[Mapping[str, str]] = {}
    """Keys this kind once had that now live elsewhere -> where (for the error message)."""

    def validate(self, where: Where) -> None:
        """Raise :class:`~ccpo_lab.errors.UserError` naming the first out-of-range key
        (``launcher.<field>``); the types are checked before. The base has nothing to check.
        """
