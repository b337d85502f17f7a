"""``launch_sweep``: plan, refuse conflicts, decide per run, write, submit, (wait).

Relaunching is idempotent: a completed run is skipped, a run whose job is still queued or
running (or that a live process executes: its ownership lock is held) is left alone, a
partial (pending, cancelled, interrupted) run is resubmitted and resumes from its
checkpoint (or, when its checkpoints are gone, restarts from step 0, and the plan says
so), a failed run is resubmitted only with ``retry_failed``. A run directory
holding another identity refuses the whole launch before anything is written. The
launcher (:mod:`ccpo_lab.launch.registry`) checks its settings against the runs' needs,
and against the machine or cluster, before anything is written.

Waiting (``--wait``) on runs that execute elsewhere (a local pool, Slurm) only watches
them: Ctrl-C detaches (exit 130) and says how to follow or cancel them. The ``inline``
launcher executes the runs in this process: Ctrl-C cancels the current run and stops.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.config.backends import missing_job_modules, resume_step
from ccpo_lab.config.identity import to_plain
from ccpo_lab.config.sweep import Sweep
from ccpo_lab.errors import UserError
from ccpo_lab.launch.base import parallel
from ccpo_lab.launch.display import StatusMonitor, make_console, print_status, watch
from ccpo_lab.launch.manifest import write_manifest
from ccpo_lab.launch.plan import PlannedRun, launcher_for, plan_sweep
from ccpo_lab.launch.status import collect_status
from ccpo_lab.runs.execute import Stopped
from ccpo_lab.runs.layout import RunDir, SweepDir, init_run_dir
from ccpo_lab.runs.owner import RunBusy, acquire

_OTHERS_POLL_S = 1.0
"""Seconds between looks at runs another live process executes (see :func:`_finish`)."""


@dataclass(frozen=True)
class Decision:
    """What a launch does with one planned run."""

    planned: PlannedRun
    """The run and its directory."""
    action: str
    """``new``, ``resume``, ``restart`` (a partial run whose checkpoints are gone: from
    step 0), ``retry`` (submitted) or ``skip``."""
    reason: str
    """Why (for skips: completed, failed, already queued...)."""

    @property
    def submit(self) -> bool:
        """Whether the run is submitted."""
        return self.action != "skip"


def decide(plan: list[PlannedRun], sweep_dir: Path, *, retry_failed: bool) -> list[Decision]:
    """Decide, for each planned run, whether it is submitted (reads files and scheduler)."""
    existing = [p.run_dir for p in plan if p.status == "exists" and p.run_dir is not None]
    rows = {r.path: r for r in collect_status(sweep_dir, existing)} if existing else {}
    out = []
    for p in plan:
        if p.status == "replace":
            out.append(Decision(p, "new", f"replaces a run that {p.replaces}"))
            continue
        if p.status == "new" or p.run_dir is None:
            out.append(Decision(p, "new", "new"))
            continue
        r = rows[p.run_dir.path]
        if r.state == "completed":
            out.append(Decision(p, "skip", "completed"))
        elif r.live:
            who = r.owner.describe() if r.owner else f"job {r.job_id}"
            out.append(Decision(p, "skip", f"already {r.state} ({who})"))
        elif r.state == "failed":
            out.append(Decision(p, "retry", f"failed, --retry-failed: {_from(p, r.step)}")
                       if retry_failed
                       else Decision(p, "skip", "failed (resubmit with --retry-failed)"))
        elif r.state == "pending" and not r.step:
            out.append(Decision(p, "resume", "pending, not queued"))
        else:
            how = _from(p, r.step)
            out.append(Decision(p, "restart" if how.startswith("no checkpoint") else "resume",
                                f"{r.state} at step {r.step or 0}; {how}"))
    return out


def _from(p: PlannedRun, step: int | None) -> str:
    """Where the run in ``p``'s directory will start, as its backend finds its
    checkpoints now: ``resumes from its checkpoint at step 10``, ``no checkpoint left:
    restarts from step 0``."""
    assert p.run_dir is not None
    at = resume_step(p.run, p.run_dir)
    if at is not None:
        return f"resumes from its checkpoint at step {at}"
    return "no checkpoint left: restarts from step 0" if step else "starts from step 0"


def summary(decisions: list[Decision]) -> str:
    """``2 new, 1 resume, 1 skipped (completed)``."""
    tally: dict[str, int] = {}
    for d in decisions:
        key = d.action if d.submit else f"skipped ({d.reason.split(' (')[0]})"
        tally[key] = tally.get(key, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in tally.items())


def check_job_modules(sw: Sweep) -> None:
    """Refuse, before anything is written, a launch whose jobs would run this interpreter
    without a module their backend imports (a base install launching CPU-backend runs)."""
    missing = missing_job_modules(sw.runs)
    if missing:
        kind, _, hint = missing[0]
        mods = ", ".join(m for k, m, _ in missing if k == kind)
        raise UserError(f"the {kind} backend's runs import {mods}, which this environment "
                        f"({sys.executable}) lacks: {hint} (docs/installing.md); nothing "
                        "was launched", key="backend.kind", value=kind)


def launch_sweep(sw: Sweep, results: str | Path, *, new_run: bool = False, wait: bool = False,
                 retry_failed: bool = False, console: Any = None,
                 only: Collection[tuple[str, int]] | None = None) -> int:
    """Launch every run of ``sw`` (or the ``(arm, seed)`` runs of ``only``, e.g. seeds
    added to a sweep later) under ``results``; return the CLI exit code.

    Runs whose job executes elsewhere (Slurm, a detached local pool) are submitted and 0 is
    returned; with ``wait``, or when they execute here (``inline``), it returns 0 when
    every run is completed, else 1.
    """
    console = console or make_console()
    sweep_dir = sw.sweep_dir(results)
    plan = [p for p in plan_sweep(sw, results, new_run=new_run)
            if only is None or (p.run.arm, p.run.seed) in only]
    conflicts = [p for p in plan if p.status == "conflict"]
    if conflicts:
        raise UserError(f"{len(conflicts)} of {len(plan)} runs would overwrite a different "
                        "run; nothing was launched", detail="\n".join(
                            str(p.conflict) for p in conflicts))
    check_job_modules(sw)
    launcher = launcher_for(sw, results)
    launcher.prepare()
    decisions = decide(plan, sweep_dir, retry_failed=retry_failed)
    targets = _write(sw, sweep_dir, plan, decisions, console)
    meant = [d.planned.run_dir for d in decisions if d.submit and d.planned.run_dir is not None]
    console.print(f"sweep [bold]{sw.name}[/bold] -> {sweep_dir}: {len(plan)} runs "
                  f"({summary(decisions)}); launcher {launcher.kind}: {launcher.resources()}",
                  highlight=False, soft_wrap=True)
    for d in decisions:
        if not d.submit and d.reason.startswith("failed"):
            console.print(f"  {d.planned.run.arm} seed {d.planned.run.seed}: {d.reason}",
                          highlight=False, soft_wrap=True)
    title = f"sweep {sw.name}"
    if not targets:
        console.print("nothing to submit", highlight=False, soft_wrap=True)
        return _wait_for_others(sweep_dir, plan, console, title, meant) if wait else 0
    sub = launcher.submit(targets, wait=wait)
    SweepDir(sweep_dir).add_submission(launcher=launcher.kind, runs=len(targets),
                                       job_ids=list(sub.job_ids), **sub.record)
    if sub.message:
        console.print(sub.message, highlight=False, markup=False, soft_wrap=True)
    if sub.detached:
        _where(console, sweep_dir)
        if not wait:
            return 0
    runs = [p.run_dir for p in plan if p.run_dir is not None]
    try:
        launcher.wait(sub, StatusMonitor(sweep_dir, runs, console, title))
    except KeyboardInterrupt:
        return _stopped(console, sweep_dir, sub.detached, None)
    except Stopped as e:
        return _stopped(console, sweep_dir, sub.detached, e.signum)
    return _finish(sweep_dir, plan, console, title, meant)


def _wait_for_others(sweep_dir: Path, plan: list[PlannedRun], console: Any, title: str,
                     meant: list[RunDir]) -> int:
    """``--wait`` with nothing to submit: wait for the runs other launches execute, as
    for this launch's own, then the final status and its exit code."""
    runs = [p.run_dir for p in plan if p.run_dir is not None]
    if any(r.state == "running" for r in collect_status(sweep_dir, runs)):
        console.print("waiting for the runs other processes execute", highlight=False,
                      soft_wrap=True)
        try:
            watch(sweep_dir, console, runs=runs, title=title)
        except KeyboardInterrupt:
            return _stopped(console, sweep_dir, True, None)
    return _finish(sweep_dir, plan, console, title, meant)


def _write(sw: Sweep, sweep_dir: Path, plan: list[PlannedRun], decisions: list[Decision],
           console: Any) -> list[RunDir]:
    """Write what the decisions need (runs replaced set aside, new run directories, the
    manifest, resubmitted runs marked pending); return the runs to submit."""
    settings = to_plain(sw.config.launcher)
    for d in decisions:
        if d.planned.status == "replace" and d.planned.run_dir is not None:
            _set_aside(SweepDir(sweep_dir), d, console)
    parallel(lambda p: init_run_dir(p.run_dir, p.run, settings),
             [d.planned for d in decisions if d.action == "new"])
    write_manifest(sw, sweep_dir, [(p.run, p.run_dir) for p in plan if p.run_dir is not None])
    targets: list[RunDir] = [d.planned.run_dir for d in decisions
                             if d.submit and d.planned.run_dir is not None]
    return _claim(targets, decisions, console)


def _set_aside(sd: SweepDir, d: Decision, console: Any) -> None:
    """Move the directory a ``replace`` decision takes over to ``_replaced/`` (under its
    lock, so no executor starts it meanwhile), saying so."""
    rd = d.planned.run_dir
    assert rd is not None
    try:
        with acquire(rd):
            dest = sd.set_aside(rd)
    except RunBusy as e:
        raise UserError("a process started executing the run this launch would replace; "
                        "nothing more was launched", file=rd.path,
                        value=e.owner.describe()) from None
    console.print(f"{d.planned.run.arm} seed {d.planned.run.seed}: the run in {rd.path} "
                  f"{d.planned.replaces}; replaced by this configuration (its files: {dest})",
                  highlight=False, markup=False, soft_wrap=True)


def _claim(targets: list[RunDir], decisions: list[Decision], console: Any) -> list[RunDir]:
    """Mark the runs to resubmit ``pending`` under their ownership lock; drop those that
    a process started executing since the decision (it keeps them)."""
    again = {d.planned.run_dir.path for d in decisions
             if d.action in ("resume", "restart", "retry") and d.planned.run_dir is not None}

    def claim(rd: RunDir) -> bool:
        if rd.path not in again:
            return True
        try:
            with acquire(rd):
                rd.write_state("pending", error=None, traceback=None, exit=None)
        except RunBusy as e:
            console.print(f"  {rd.arm} {rd.path.name}: left to {e.owner.describe()}, which "
                          "started executing it", highlight=False, markup=False, soft_wrap=True)
            return False
        return True

    kept = parallel(claim, targets)
    return [rd for rd, ok in zip(targets, kept, strict=True) if ok]


def _stopped(console: Any, sweep_dir: Path, detached: bool, signum: int | None) -> int:
    """The exit code after Ctrl-C (``signum`` None) or SIGHUP/SIGTERM while waiting, with
    what became of the runs (no traceback). A closed terminal may refuse the message."""
    import contextlib
    import signal

    why = "interrupted" if signum is None else f"stopped by {signal.Signals(signum).name}"
    if detached:
        text = (f"{why}: stopped watching; the runs go on. follow: ccpo-lab status "
                f"{sweep_dir} --watch; cancel: ccpo-lab cancel {sweep_dir}")
    else:
        text = (f"{why}: the current run was recorded "
                f"{'cancelled' if signum is None else 'interrupted'}; the others did not "
                f"start. Relaunch the same command to resume (ccpo-lab status {sweep_dir})")
    with contextlib.suppress(OSError):
        console.print(text, highlight=False, markup=False, soft_wrap=True)
    return 130 if signum is None else 128 + signum


def _where(console: Any, sweep_dir: Path) -> None:
    console.print(f"follow: ccpo-lab status {sweep_dir} --watch; cancel: ccpo-lab cancel "
                  f"{sweep_dir}; job logs: {sweep_dir}/_jobs/ and <run>/logs/", highlight=False,
                  markup=False, soft_wrap=True)


def _finish(sweep_dir: Path, plan: list[PlannedRun], console: Any, title: str,
            submitted: Collection[RunDir] = ()) -> int:
    """Show the runs' status; 0 when every run is completed, else 1. A run of
    ``submitted`` (the runs this launch decided to execute) that another live process
    turned out to execute (two launches raced for it; the other took it first, see
    :func:`_claim`) is waited for first, so the code says how it ended; runs
    skipped when planning because another process held them are not (exit 1 while they
    run)."""
    run_dirs = [p.run_dir for p in plan if p.run_dir is not None]
    rows = collect_status(sweep_dir, run_dirs)
    mine = {str(rd.path) for rd in submitted}

    def others() -> list[Any]:  # submitted here, found executed by another live process
        return [r for r in rows if str(r.path) in mine and r.owner is not None
                and r.owner.pid != os.getpid() and not r.terminal]

    if others():
        pids = ", ".join(sorted({str(r.owner.pid) for r in others()}))
        console.print(f"waiting for {len(others())} run(s) this launch submitted, which "
                      f"another process executes (pid {pids})", highlight=False,
                      soft_wrap=True)
        while others():
            time.sleep(_OTHERS_POLL_S)
            rows = collect_status(sweep_dir, run_dirs)
    print_status(console, rows, title)
    return 0 if rows and all(r.state == "completed" for r in rows) else 1
