"""The ``inline`` launcher: every run in this process, one after another (debugging, demos).

A failing run is recorded (state ``failed`` with its traceback) and the next run starts.
A run another process executes (its ownership lock is held) is skipped. Ctrl-C cancels
the current run and stops; SIGHUP (the terminal closed) or SIGTERM records it
``interrupted`` and stops; ``ccpo-lab cancel`` from another terminal cancels the selected
runs and the rest go on. A relaunch resumes cancelled and interrupted runs.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccpo_lab.config.launchers.inline import InlineSettings
from ccpo_lab.launch.base import TERMINAL, Launcher, Monitor, Reconciled, Submission, gone
from ccpo_lab.launch.environment import INLINE
from ccpo_lab.placement import Placement, this_host
from ccpo_lab.runs.execute import stop_on
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.owner import current_owner

if TYPE_CHECKING:
    from ccpo_lab.launch.status import RunStatus


placement_here = INLINE
"""This launcher's job environment under the name jobs pickled before
:mod:`ccpo_lab.launch.environment` refer to."""


def _ccpo_alive(pid: Any) -> bool:
    """Whether ``pid`` is a live ccpo-lab process on this host (not a reused pid)."""
    try:
        return b"ccpo" in Path(f"/proc/{int(pid)}/cmdline").read_bytes()
    except (OSError, ValueError, TypeError):
        return False


class InlineLauncher(Launcher):
    """Runs every run here, in order; :meth:`wait` is where they execute."""

    kind = "inline"
    settings_class = InlineSettings
    environment = INLINE

    def placement(self) -> Placement:
        """This process."""
        return this_host()

    def resources(self) -> str:
        """``this process``."""
        return "this process"

    def preview(self, n_runs: int) -> list[str]:
        """The runs execute here, one after another."""
        return [f"{n_runs} runs executed in this process, one after another (progress "
                "lines on stdout when it is not a terminal)"]

    def submit(self, runs: Sequence[RunDir], *, wait: bool) -> Submission:
        """Record this process as each run's job; :meth:`wait` executes them."""
        for rd in runs:
            rd.record_job(launcher=self.kind, job_id=str(os.getpid()), pid=os.getpid())
        return Submission(runs=tuple(runs))

    def wait(self, submission: Submission, monitor: Monitor) -> None:
        """Execute the runs one after another, with a live table at a terminal.

        Raises ``KeyboardInterrupt`` (Ctrl-C: the current run is recorded ``cancelled``)
        or :class:`~ccpo_lab.runs.execute.Stopped` (SIGHUP, SIGTERM: ``interrupted``).
        """
        from ccpo_lab.launch.job import RunJob

        runs = submission.runs
        busy: list[RunDir] = []
        monitor.start(auto_refresh=True)
        try:
            with stop_on(signal.SIGHUP, signal.SIGTERM):
                for i, rd in enumerate(runs):
                    if rd.read_state().get("state") in ("cancelled", "completed"):
                        continue
                    monitor.note(f"[{i + 1}/{len(runs)}] {rd.path}")
                    try:
                        out = RunJob(rd.path, INLINE)()
                    except KeyboardInterrupt:
                        if rd.read_job().get("cancel_requested"):
                            continue
                        raise
                    except Exception as e:  # noqa: BLE001 - in state.json; next run goes on
                        monitor.note(f"  failed: {type(e).__name__}: {e}")
                        continue
                    if out.get("busy"):
                        monitor.note(f"  executed by {out['busy']}: waiting for it")
                        busy.append(rd)
                # runs another process took over meanwhile: wait for them like for the
                # others (which this one executed)
                while any(current_owner(rd) is not None for rd in busy):
                    monitor.refresh()
                    time.sleep(self.poll_s)
            monitor.refresh()
        finally:
            monitor.stop()

    @classmethod
    def reconcile(cls, file_state: str, job: Mapping[str, Any], sched: str | None,
                  state: Mapping[str, Any]) -> Reconciled:
        """(No process holds the run.) A run recorded running lost its executor: it is
        interrupted; a pending run is queued while the process that launched it lives."""
        if file_state in TERMINAL:
            return Reconciled(file_state)
        if file_state in ("running", "requeued"):
            return Reconciled("interrupted", gone(state))
        if file_state == "pending" and _ccpo_alive(job.get("pid")):
            return Reconciled("pending", "", True)
        return Reconciled(file_state)

    @classmethod
    def job_label(cls, job: Mapping[str, Any], state: Mapping[str, Any]) -> str | None:
        """The process id."""
        value = job.get("job_id") or state.get("pid")
        return None if value is None else str(value)

    @classmethod
    def cancel(cls, rows: Sequence[RunStatus]) -> tuple[list[tuple[RunStatus, str]], list[str]]:
        """A queued run is dropped from its process's queue (it skips cancelled runs); a
        running one is interrupted by the caller (it goes on with its next run)."""
        return [(r, "dequeued" if r.live and r.state == "pending" else "marked cancelled")
                for r in rows], []
