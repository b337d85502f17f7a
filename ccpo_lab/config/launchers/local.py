"""The ``local`` launcher's settings: runs at once, GPUs per run."""

from __future__ import annotations

from dataclasses import dataclass, field

from ccpo_lab.config.launcher import LauncherSettings, Where
from ccpo_lab.config.validate import check_range


@dataclass(frozen=True)
class LocalSettings(LauncherSettings):
    """``launcher.kind: local``: parallel runs on this machine, each on its own GPU slice."""

    kind: str = field(default="local", init=False)
    max_parallel: int = 1
    """Runs at once (at most as many as the machine has slices)."""
    gpus_per_run: int | None = None
    """GPUs per run; default: what the run's backend needs (verl: ``nnodes x
    n_gpus_per_node``; the CPU backend: none, CPU slots). A run that needs GPUs gets
    exactly that many; one that needs none may be given a slice anyway."""

    def validate(self, where: Where) -> None:
        """``max_parallel >= 1``, ``gpus_per_run >= 0``."""
        check_range(self.max_parallel, low=1, key="launcher.max_parallel",
                    file=where("launcher.max_parallel"))
        if self.gpus_per_run is not None:
            check_range(self.gpus_per_run, low=0, key="launcher.gpus_per_run",
                        file=where("launcher.gpus_per_run"))
