"""Adaptive sweeps without training: a launcher that only queues, runs completed by hand.

``QueueLauncher`` (``launcher.kind: queue``) records each submitted run's job in its
``job.json`` and starts nothing (a scheduler whose queue never moves), so a test sees
exactly which runs a command launched. :func:`complete` then finishes a run the way a
backend does: metrics in ``metrics.jsonl`` and ``state.json`` ``completed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccpo_lab.config.launcher import LauncherSettings
from ccpo_lab.launch import registry
from ccpo_lab.launch.base import Launcher, Submission
from ccpo_lab.placement import Placement
from ccpo_lab.runs.layout import RunDir, SweepDir
from tests.report.builders import log_evals, sweep_file


@dataclass(frozen=True)
class QueueSettings(LauncherSettings):
    """``launcher.kind: queue``: no settings."""

    kind: str = field(default="queue", init=False)


def placement_here() -> Placement:
    """Never called: nothing runs."""
    return Placement()


class QueueLauncher(Launcher):
    """Queues runs (records their ``job.json``) and never starts them."""

    kind = "queue"
    settings_class = QueueSettings

    def placement(self) -> Placement:
        return Placement(cpus=1)

    def resources(self) -> str:
        return "a queue that never starts"

    def submit(self, runs: Sequence[RunDir], *, wait: bool) -> Submission:
        for rd in runs:
            rd.record_job(launcher=self.kind, job_id=f"q-{rd.arm}-{rd.seed}")
        return Submission(runs=tuple(runs), detached=True, message=f"queued {len(runs)}")


def register() -> None:
    """Register the queue launcher (idempotent)."""
    registry.register(QueueLauncher)


# grpo is the reference; gigpo is far better on every seed (resolves at look 1);
# ccpo-return-hard is grpo plus noise (no effect: runs into the maximum)
GRPO = (0.40, 0.45, 0.50, 0.42, 0.47, 0.52, 0.44, 0.49, 0.41)
SCORES: dict[str, tuple[float, ...]] = {
    "grpo": GRPO,
    "gigpo": tuple(g + 0.30 + d for g, d in zip(GRPO, (0.001, -0.001, 0.0) * 3, strict=True)),
    "ccpo-return-hard": tuple(g + d for g, d in zip(
        GRPO, (0.02, -0.03, 0.01, -0.02, 0.03, 0.0, -0.01, 0.02, -0.02), strict=True)),
}
ARMS = ("grpo", "gigpo", "ccpo-return-hard")


def adaptive_sweep(tmp: Path, *, name: str = "adapt", launcher: str = "queue",
                   adaptive: Mapping[str, Any] | None = None) -> Path:
    """A three-arm sweep (seeds 0-2, reference grpo, window step >= 20) whose design adds
    three seeds per look up to six, without futility stops (so a null comparison runs
    into the maximum)."""
    design = {"max_seeds": 6, "seeds_per_look": 3, "futility": False, **(adaptive or {})}
    return sweep_file(tmp, name=name, arms=ARMS, seeds=(0, 1, 2),
                      analysis={"reference": "grpo", "adaptive": design},
                      extra=f"launcher:\n  kind: {launcher}\n")


def complete(sweep_dir: Path, arm: str, seed: int, value: float | None = None) -> None:
    """Finish one run: held-out evaluations in its window, state ``completed``."""
    rd = SweepDir(sweep_dir).run_dir(arm, seed)
    v = SCORES[arm][seed] if value is None else value
    log_evals(rd, {0: 0.2, 20: v, 25: v, 30: v})
    rd.write_state("completed", step=30)


def queued(sweep_dir: Path) -> set[tuple[str, int]]:
    """``(arm, seed)`` of every run the queue launcher received."""
    return {(rd.arm, int(rd.seed or 0)) for rd in SweepDir(sweep_dir).run_dirs()
            if rd.read_job().get("launcher") == "queue"}


def finished_study(tmp: Path) -> Path:
    """The sweep directory of :func:`adaptive_sweep` run to the end: look 1 resolves
    gigpo (better) and continues ccpo-return-hard, look 2 (six seeds) leaves it
    unresolved."""
    from ccpo_lab.adaptive.launch import launch_adaptive
    from ccpo_lab.config.sweep import load_sweep

    path = adaptive_sweep(tmp)
    results = tmp / "results"
    sweep_dir = results / "adapt"
    known = "queue" in registry.LAUNCHERS
    register()
    try:
        launch_adaptive(load_sweep(path), results)
        for arm in ARMS:
            for seed in (0, 1, 2):
                complete(sweep_dir, arm, seed)
        launch_adaptive(load_sweep(path), results)
        for arm in ("grpo", "ccpo-return-hard"):
            for seed in (3, 4, 5):
                complete(sweep_dir, arm, seed)
        assert launch_adaptive(load_sweep(path), results) == 0
    finally:
        if not known:
            registry.unregister("queue")
    return sweep_dir
