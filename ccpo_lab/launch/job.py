"""The callable every submitit-based launcher runs, and where submitit puts its logs.

:class:`RunJob` executes one run directory (:func:`ccpo_lab.runs.execute.execute_run`)
where its launcher placed it: the launcher gives it its ``placement_here`` function, which
the job calls on the node to learn its :class:`~ccpo_lab.placement.Placement` (hosts, rank,
tasks, GPUs, CPUs). Task 0 executes the run; the other tasks of a multi-node job serve it
(:func:`ccpo_lab.runs.execute.serve_run`). It is a ``submitit.helpers.Checkpointable``: on
timeout or preemption Slurm signals the job, submitit calls :meth:`RunJob.checkpoint`,
requeues the job, and the restarted job resumes from the run's own checkpoint files.

``job.json`` is written by launchers only, never by the job
(:meth:`~ccpo_lab.runs.layout.RunDir.record_job`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from submitit.helpers import Checkpointable, DelayedSubmission

from ccpo_lab.placement import Placement, this_host
from ccpo_lab.runs.layout import RunDir

PlacementFn = Callable[[], Placement]
"""A launcher module's ``placement_here`` (picklable: a module-level function)."""


def _now() -> str:
    from ccpo_lab.runs.provenance import now_iso

    return now_iso()


def _mark(rd: RunDir, state: str, **info: Any) -> None:
    with contextlib.suppress(OSError):
        rd.write_state(state, **info)


class RunJob(Checkpointable):
    """Execute one run directory where its launcher placed it; checkpointable."""

    def __init__(self, run_dir: str | Path, placement: PlacementFn = this_host) -> None:
        self.run_dir = str(Path(run_dir).resolve())
        self.placement = placement
        self._requeueing = False

    def __call__(self) -> dict[str, Any]:
        """Execute the run (task 0) or serve it (other tasks); resume from its checkpoint."""
        from ccpo_lab.runs.execute import execute_run, serve_run

        self._requeueing = False
        rd = RunDir(Path(self.run_dir))
        where = getattr(self, "placement", this_host)()  # jobs pickled before placements
        if where.is_worker:
            return serve_run(self.run_dir, where)
        st = rd.read_state()
        if st.get("state") == "completed":
            return dict(st.get("summary") or {})
        if st.get("state") == "cancelled":
            return {"cancelled": True}
        rd.write_state("running", started=_now(), restarts=where.restarts,
                       host=socket.gethostname(), pid=os.getpid(), error=None, traceback=None)
        try:
            return execute_run(self.run_dir, where)
        except KeyboardInterrupt:
            _mark(rd, "cancelled", error="cancelled (SIGINT)", traceback=None)
            raise
        except SystemExit as e:
            if self._requeueing:
                _mark(rd, "requeued", error=None, traceback=None, requeued=_now())
            elif rd.read_state().get("state") != "failed":
                _mark(rd, "failed", error=f"SystemExit: {e.code}",
                      traceback=traceback.format_exc())
            raise
        except BaseException as e:
            if rd.read_state().get("state") != "failed":
                _mark(rd, "failed", error=f"{type(e).__name__}: {e}",
                      traceback=traceback.format_exc())
            raise

    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission:
        """Called by submitit on timeout/preemption: resubmit the same run directory.

        Nothing is held in memory: the restarted job resumes from the run's checkpoints.
        """
        self._requeueing = True
        return DelayedSubmission(RunJob(self.run_dir, getattr(self, "placement", this_host)))

    def __repr__(self) -> str:
        return f"RunJob({self.run_dir!r})"


def submitit_log_paths(folder: str | Path, job_id: str) -> dict[str, str]:
    """stdout/stderr of task 0 of submitit job ``job_id`` whose executor folder is ``folder``."""
    from submitit.core.utils import JobPaths

    paths = JobPaths(folder, job_id=job_id, task_id=0)
    return {"stdout": str(paths.stdout), "stderr": str(paths.stderr),
            "folder": str(paths.folder)}
