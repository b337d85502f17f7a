"""Cancel the runs of a sweep (all, one arm, one seed), and check that they stopped.

Every unfinished run selected goes first to the launcher its ``job.json`` names
(:meth:`Launcher.cancel <ccpo_lab.launch.base.Launcher.cancel>`: one ``scancel`` for Slurm
jobs; a queued ``local``/``inline`` run is dequeued). A run that a process on this host
executes (it provably holds the run's ownership lock and is the user's: the pid written in
``owner.lock`` is never trusted alone, :func:`~ccpo_lab.runs.owner.lock_holders`) is then sent
SIGINT (it records ``cancelled`` and exits), SIGKILL if it still runs after
``grace_s`` seconds, and the lock is watched until it is free: a run still held after that
is reported as a problem, not as cancelled. Finally each stopped run is marked
``cancelled`` under its lock, so no pool or launcher starts it. A relaunch resumes
cancelled runs from their checkpoints.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from ccpo_lab.errors import UserError
from ccpo_lab.launch.status import LEFT_OUT, RunStatus, collect_status, tracker
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.owner import Owner, UnsafeLockFile, current_owner, lock_holders, try_acquire
from ccpo_lab.runs.provenance import now_iso

GRACE_S = 10.0
"""Seconds a run has to stop after SIGINT before it is killed (SIGKILL)."""
KILL_WAIT_S = 5.0
"""Seconds to wait for a killed run's lock to be freed."""


@dataclass(frozen=True)
class Cancelled:
    """One cancelled run and how."""

    status: RunStatus
    """The run's status before cancelling."""
    how: str
    """What was done (``scancel 123_4``, ``SIGINT pid 77, stopped in 1.2 s``,
    ``dequeued``)."""


def select(rows: list[RunStatus], arm: str | None, seed: int | None) -> list[RunStatus]:
    """Rows of ``arm`` and/or ``seed``; an unknown arm or seed lists the valid ones."""
    if arm is not None and arm not in {r.arm for r in rows}:
        raise UserError("no such arm in this sweep", key="--arm", value=arm,
                        valid=sorted({r.arm for r in rows}))
    if seed is not None and seed not in {r.seed for r in rows}:
        raise UserError("no such seed in this sweep", key="--seed", value=seed,
                        valid=sorted({r.seed for r in rows}))
    return [r for r in rows if (arm is None or r.arm == arm) and (seed is None or r.seed == seed)]


def _signal(rd: RunDir, owner: Owner, sig: int) -> str | None:
    """Send ``sig`` to the processes that provably hold ``rd``'s lock and are ours
    (:func:`~ccpo_lab.runs.owner.lock_holders`), never to a pid merely written in the
    lock file; an error message, or None when sent (or when none holds it any more)."""
    holders = lock_holders(rd)
    if holders is None:
        return (f"{owner.describe()} cannot be verified to hold the run's lock here (no "
                "/proc): not signalled")
    if not holders:
        if current_owner(rd) is None:
            return None  # gone meanwhile: what we wanted
        return (f"owner.lock names {owner.describe()}, which does not hold the run's lock, "
                "and no process of yours does (a stale or planted file, or another user's "
                "run): not signalled")
    for pid in holders:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            continue  # gone meanwhile: what we wanted
        except OSError as e:
            return f"cannot signal pid {pid}: {e.strerror}"
    return None


def _wait_free(rds: list[RunDir], timeout: float) -> set[Path]:
    """Wait until no process holds the runs (at most ``timeout`` s); the paths still held."""
    left = {rd.path: rd for rd in rds}
    deadline = time.monotonic() + timeout
    while left:
        for path in [p for p, rd in left.items() if current_owner(rd) is None]:
            del left[path]
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    return set(left)


def stop_executors(rows: list[RunStatus], grace_s: float = GRACE_S
                   ) -> tuple[dict[Path, str], list[str]]:
    """Stop the processes on this host that execute ``rows`` (SIGINT, then SIGKILL after
    ``grace_s``) and wait for their locks. Returns ``{path: how}`` and problems (runs that
    could not be stopped from here, or are still held)."""
    how: dict[Path, str] = {}
    problems: list[str] = []
    held: dict[Path, tuple[RunStatus, Owner]] = {}
    for r in rows:
        owner = current_owner(RunDir(r.path))
        if owner is None:
            continue
        if not owner.here:
            if not tracker(r.launcher).scheduled:
                problems.append(f"{r.arm} seed {r.seed}: executed by {owner.describe()}; "
                                "cancel it on that host")
            continue
        if r.path in how:
            continue
        RunDir(r.path).update_job(cancel_requested=True)
        error = _signal(RunDir(r.path), owner, signal.SIGINT)
        if error:
            problems.append(f"{r.arm} seed {r.seed}: {error}")
            continue
        held[r.path] = (r, owner)
    started = time.monotonic()
    still = _wait_free([RunDir(p) for p in held], grace_s)
    for path, (_, owner) in held.items():
        if path not in still:
            how[path] = f"SIGINT {owner.describe()}, stopped in " \
                        f"{time.monotonic() - started:.1f} s"
    for path in still:
        r, owner = held[path]
        error = _signal(RunDir(path), owner, signal.SIGKILL)
        if error:
            problems.append(f"{r.arm} seed {r.seed}: {error}")
    stuck = _wait_free([RunDir(p) for p in still], KILL_WAIT_S) if still else set()
    for path in still:
        r, owner = held[path]
        if path in stuck:
            problems.append(f"{r.arm} seed {r.seed}: still executed by {owner.describe()} "
                            f"after SIGINT and SIGKILL")
        else:
            how[path] = f"SIGKILL {owner.describe()} (SIGINT ignored for {grace_s:g} s)"
    return how, problems


def _mark_cancelled(rd: RunDir, when: str, locked_wait_s: float = 3.0) -> bool:
    """Record ``cancelled`` under the run's lock (waiting a moment for an executor that
    is recording its own outcome); False when a process still holds the run."""
    deadline = time.monotonic() + locked_wait_s
    while True:
        try:
            lock = try_acquire(rd)
        except UnsafeLockFile:
            return False  # never written through: reported as not stopped
        if lock is not None:
            break
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    with lock:
        if rd.read_state().get("state") != "completed":
            rd.write_state("cancelled", cancelled=when)
    return True


def cancel_runs(sweep_dir: Path, *, arm: str | None = None, seed: int | None = None,
                grace_s: float = GRACE_S) -> tuple[list[Cancelled], list[str]]:
    """Cancel the selected runs that are not finished. Returns (cancelled, problems):
    a run that could not be stopped is a problem and is not in the first list."""
    rows = collect_status(sweep_dir)
    if not rows:
        raise UserError("no runs found (expected <sweep dir>/<arm>/seed-<k>/ or sweep.json)",
                        file=sweep_dir)
    chosen = [r for r in select(rows, arm, seed) if not r.terminal]
    left = [f"{r.arm} seed {r.seed}: {r.note}: not touched" for r in chosen
            if r.state == LEFT_OUT]
    done, problems = cancel_rows([r for r in chosen if r.state != LEFT_OUT], grace_s)
    return done, left + problems


def cancel_rows(chosen: list[RunStatus], grace_s: float = GRACE_S
                ) -> tuple[list[Cancelled], list[str]]:
    """Cancel the unfinished runs of ``chosen`` (status rows of run or evaluation-job
    directories): withdraw them from their launchers, stop their executors here, mark them
    cancelled. Returns (cancelled, problems), as :func:`cancel_runs`."""
    how: dict[Path, str] = {}
    problems: list[str] = []
    for kind in dict.fromkeys(r.launcher for r in chosen):
        done, trouble = tracker(kind).cancel([r for r in chosen if r.launcher == kind])
        how.update((r.path, text) for r, text in done)
        problems += trouble
    stopped, trouble = stop_executors(chosen, grace_s)
    for path, text in stopped.items():
        first = how.get(path, "marked cancelled")
        how[path] = text if first in ("marked cancelled", "dequeued") else f"{first}; {text}"
    problems += trouble
    out = []
    when = now_iso()
    for r in chosen:
        rd = RunDir(r.path)
        if _mark_cancelled(rd, when):
            out.append(Cancelled(r, how.get(r.path, "marked cancelled")))
        elif tracker(r.launcher).scheduled:  # its job is being killed on its node
            rd.write_state("cancelled", cancelled=when)
            out.append(Cancelled(r, how.get(r.path, "marked cancelled")))
        elif not any(p.startswith(f"{r.arm} seed {r.seed}:") for p in problems):
            problems.append(f"{r.arm} seed {r.seed}: still executed by "
                            f"{(current_owner(rd) or Owner(None, None, None)).describe()}")
    return out, problems
