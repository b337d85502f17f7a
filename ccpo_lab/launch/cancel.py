"""Cancel the runs of a sweep (all, one arm, one seed), each through its own launcher.

Every unfinished run selected goes to the launcher its ``job.json`` names
(:meth:`Launcher.cancel <ccpo_lab.launch.base.Launcher.cancel>`: one ``scancel`` for Slurm
jobs, SIGINT for a running ``local`` controller or ``inline`` process, a queued run is
dequeued), then is marked ``cancelled`` so no pool starts it. A relaunch resumes cancelled
runs from their checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ccpo_lab.errors import UserError
from ccpo_lab.launch.status import RunStatus, collect_status, tracker
from ccpo_lab.runs.layout import RunDir


@dataclass(frozen=True)
class Cancelled:
    """One cancelled run and how."""

    status: RunStatus
    """The run's status before cancelling."""
    how: str
    """What was done (``scancel 123_4``, ``SIGINT pid 77``, ``dequeued``)."""


def select(rows: list[RunStatus], arm: str | None, seed: int | None) -> list[RunStatus]:
    """Rows of ``arm`` and/or ``seed``; an unknown arm or seed lists the valid ones."""
    if arm is not None and arm not in {r.arm for r in rows}:
        raise UserError("no such arm in this sweep", key="--arm", value=arm,
                        valid=sorted({r.arm for r in rows}))
    if seed is not None and seed not in {r.seed for r in rows}:
        raise UserError("no such seed in this sweep", key="--seed", value=seed,
                        valid=sorted({r.seed for r in rows}))
    return [r for r in rows if (arm is None or r.arm == arm) and (seed is None or r.seed == seed)]


def cancel_runs(sweep_dir: Path, *, arm: str | None = None,
                seed: int | None = None) -> tuple[list[Cancelled], list[str]]:
    """Cancel the selected runs that are not finished. Returns (cancelled, problems)."""
    from ccpo_lab.runs.provenance import now_iso

    rows = collect_status(sweep_dir)
    if not rows:
        raise UserError("no runs found (expected <sweep dir>/<arm>/seed-<k>/ or sweep.json)",
                        file=sweep_dir)
    chosen = [r for r in select(rows, arm, seed) if not r.terminal]
    how: dict[Path, str] = {}
    problems: list[str] = []
    for kind in dict.fromkeys(r.launcher for r in chosen):
        done, trouble = tracker(kind).cancel([r for r in chosen if r.launcher == kind])
        how.update((r.path, text) for r, text in done)
        problems += trouble
    for r in chosen:
        RunDir(r.path).write_state("cancelled", cancelled=now_iso())
    return [Cancelled(r, how.get(r.path, "marked cancelled")) for r in chosen], problems
