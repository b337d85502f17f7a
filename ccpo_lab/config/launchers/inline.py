"""The ``inline`` launcher's settings (it has none)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ccpo_lab.config.launcher import LauncherSettings


@dataclass(frozen=True)
class InlineSettings(LauncherSettings):
    """``launcher.kind: inline``: no settings (the runs execute in this process)."""

    kind: str = field(default="inline", init=False)
