"""The sweep's ``tracking.wandb`` section and the checks of ``tracking`` (issue 26).

Weights & Biases is off unless ``tracking.wandb.mode`` is ``online`` or ``offline``: then
every run logs to its own W&B run while it trains (verl keeps verl's ``wandb`` logger;
the CPU backend logs from its loop), named and grouped by ccpo-lab, and ``ccpo-lab sync
--wandb`` pushes a finished or imported sweep. ``tracking.live`` makes ``sweep --wait``
keep the MLflow store current while the runs go (``ccpo-lab sync --watch``).

Tracking is bookkeeping, not training: no part of any run's identity.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ccpo_lab.errors import UserError

WANDB_MODES = ("disabled", "offline", "online")
"""``disabled``: no W&B at all (nothing imported); ``offline``: runs are written under each
run directory (``<run>/wandb/offline-run-*``; ``wandb sync`` uploads them later);
``online``: streamed to the W&B server."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
"""A W&B project or entity name (W&B refuses '/', '\\', '#', '?', '%', ':')."""
_TAG_LEN = 64
"""W&B's longest tag."""


@dataclass(frozen=True)
class WandbConfig:
    """``tracking.wandb``: log every run to Weights & Biases as well (optional extra
    ``ccpo-lab[wandb]``); off by default."""

    mode: str = "disabled"
    """``online``, ``offline`` or ``disabled`` (the default: nothing imported, nothing
    written)."""
    project: str | None = None
    """W&B project; default: the sweep's name."""
    entity: str | None = None
    """W&B entity (user or team); default: the logged-in user's default entity."""
    tags: list[str] = field(default_factory=list)
    """Tags of every run."""

    @property
    def enabled(self) -> bool:
        """Whether runs log to W&B."""
        return self.mode != "disabled"

    def validate(self, where: Callable[[str], str | None]) -> None:
        """Refuse an unknown mode, a project or entity W&B would refuse, an over-long tag,
        and (``online``/``offline``) a missing ``wandb`` package."""
        if self.mode not in WANDB_MODES:
            raise UserError("unknown W&B mode", file=where("tracking.wandb.mode"),
                            key="tracking.wandb.mode", value=self.mode, valid=WANDB_MODES)
        for key in ("project", "entity"):
            value = getattr(self, key)
            if value is not None and not _NAME.match(value):
                raise UserError("not a W&B name (letters, digits, '_', '.', '-'; at most 128)",
                                file=where(f"tracking.wandb.{key}"),
                                key=f"tracking.wandb.{key}", value=value)
        for i, tag in enumerate(self.tags):
            if not tag or len(tag) > _TAG_LEN or "," in tag:
                raise UserError(f"a W&B tag has 1 to {_TAG_LEN} characters, no comma (verl "
                                "runs pass the tags in WANDB_TAGS, comma-separated)",
                                file=where("tracking.wandb.tags"),
                                key=f"tracking.wandb.tags[{i}]", value=tag)
        if self.enabled and not wandb_installed():
            raise UserError("the wandb package is not installed (pip install 'ccpo-lab[wandb]'"
                            ", or set tracking.wandb.mode=disabled)",
                            file=where("tracking.wandb.mode"), key="tracking.wandb.mode",
                            value=self.mode)


def wandb_installed() -> bool:
    """Whether ``import wandb`` would find the package (without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec("wandb") is not None
    except (ImportError, ValueError):
        return False


LIVE_EVERY_MIN_S = 1.0
"""Shortest interval of the live sync (each round opens the store and reads every run)."""


def check_tracking(enabled: bool, live: bool, live_every: float, wandb: WandbConfig,
                   where: Callable[[str], str | None]) -> None:
    """The checks of the ``tracking`` section the schema's types cannot express."""
    if live and not enabled:
        raise UserError("the live MLflow sync needs tracking on (tracking.enabled: true)",
                        file=where("tracking.live"), key="tracking.live", value=live)
    if not live_every >= LIVE_EVERY_MIN_S:
        raise UserError("out of range", file=where("tracking.live_every"),
                        key="tracking.live_every", value=live_every,
                        valid=f"[{LIVE_EVERY_MIN_S:g}, inf) seconds")
    wandb.validate(where)
