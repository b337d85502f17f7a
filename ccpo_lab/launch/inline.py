"""The ``inline`` launcher: every run in this process, one after another (debugging, demos).

A failing run is recorded (state ``failed`` with its traceback) and the next run starts.
Ctrl-C cancels the current run and stops; ``ccpo-lab cancel`` from another terminal
cancels the selected runs and the rest go on.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccpo_lab.config.launcher import LauncherSettings
from ccpo_lab.launch.base import TERMINAL, Launcher, Monitor, Reconciled, Submission
from ccpo_lab.placement import Placement, this_host
from ccpo_lab.runs.layout import RunDir

if TYPE_CHECKING:
    from ccpo_lab.launch.status import RunStatus


@dataclass(frozen=True)
class InlineSettings(LauncherSettings):
    """``launcher.kind: inline``: no settings (the runs execute in this process)."""

    kind: str = field(default="inline", init=False)


def placement_here() -> Placement:
    """This process, on this machine."""
    return this_host()


def _alive(pid: Any, host: Any) -> bool | None:
    """True/False for a pid on this host; None when it ran on another host."""
    if host and host != socket.gethostname():
        return None
    try:
        return Path(f"/proc/{int(pid)}").exists()
    except (TypeError, ValueError):
        return False


class InlineLauncher(Launcher):
    """Runs every run here, in order; :meth:`wait` is where they execute."""

    kind = "inline"
    settings_class = InlineSettings

    def placement(self) -> Placement:
        """This process."""
        return this_host()

    def resources(self) -> str:
        """``this process``."""
        return "this process"

    def submit(self, runs: Sequence[RunDir], *, wait: bool) -> Submission:
        """Record this process as each run's job; :meth:`wait` executes them."""
        for rd in runs:
            rd.record_job(launcher=self.kind, job_id=str(os.getpid()), pid=os.getpid())
        return Submission(runs=tuple(runs))

    def wait(self, submission: Submission, monitor: Monitor) -> None:
        """Execute the runs one after another, with a live table at a terminal."""
        from ccpo_lab.launch.job import RunJob

        runs = submission.runs
        monitor.start(auto_refresh=True)
        try:
            for i, rd in enumerate(runs):
                if rd.read_state().get("state") in ("cancelled", "completed"):
                    continue
                monitor.note(f"[{i + 1}/{len(runs)}] {rd.path}")
                try:
                    RunJob(rd.path, placement_here)()
                except KeyboardInterrupt:
                    if rd.read_job().get("cancel_requested"):
                        continue
                    raise
                except Exception as e:  # noqa: BLE001 - recorded in state.json; next run goes on
                    monitor.note(f"  failed: {type(e).__name__}: {e}")
            monitor.refresh()
        finally:
            monitor.stop()

    @classmethod
    def reconcile(cls, file_state: str, job: Mapping[str, Any], sched: str | None,
                  state: Mapping[str, Any]) -> Reconciled:
        """A running run whose process is gone has failed."""
        if file_state in TERMINAL:
            return Reconciled(file_state)
        alive = _alive(state.get("pid") or job.get("pid"), state.get("host"))
        if file_state == "running" and alive is False:
            return Reconciled("failed", "process gone without recording an outcome")
        return Reconciled(file_state, "", file_state == "running")

    @classmethod
    def job_label(cls, job: Mapping[str, Any], state: Mapping[str, Any]) -> str | None:
        """The process id."""
        value = job.get("job_id") or state.get("pid")
        return None if value is None else str(value)

    @classmethod
    def cancel(cls, rows: Sequence[RunStatus]) -> tuple[list[tuple[RunStatus, str]], list[str]]:
        """Interrupt the process executing a running run; it goes on with its next run."""
        done: list[tuple[RunStatus, str]] = []
        problems: list[str] = []
        for r in rows:
            how = "marked cancelled"
            if r.live and r.job_id:
                RunDir(r.path).update_job(cancel_requested=True)
                try:
                    os.kill(int(r.job_id), signal.SIGINT)
                    how = f"SIGINT pid {r.job_id}"
                except (OSError, ValueError) as e:
                    problems.append(f"{r.arm} seed {r.seed}: cannot signal pid {r.job_id}: {e}")
            done.append((r, how))
        return done, problems
