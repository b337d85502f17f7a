"""The callable every submitit-based launcher runs, and where submitit puts its logs.

:class:`RunJob` executes one run directory (:func:`ccpo_lab.runs.execute.execute_run`)
where its launcher placed it: the launcher gives it its job environment
(:mod:`ccpo_lab.launch.environment`), which the job calls on the node to learn its
:class:`~ccpo_lab.placement.Placement` (hosts, rank, tasks, GPUs, CPUs). Task 0 executes
the run (holding its ownership lock: a run another process executes is left to it); the
other tasks of a multi-node job serve it (:func:`ccpo_lab.runs.execute.serve_run`). It is
a ``submitit.helpers.Checkpointable``: on timeout or preemption Slurm signals the job,
submitit calls :meth:`RunJob.checkpoint`, requeues the job, and the restarted job resumes
from the run's own checkpoint files.

``job.json`` is written by launchers only, never by the job
(:meth:`~ccpo_lab.runs.layout.RunDir.record_job`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from submitit.helpers import Checkpointable, DelayedSubmission

from ccpo_lab.placement import Placement, this_host
from ccpo_lab.runs.execute import execute_run, serve_run, supervise
from ccpo_lab.runs.owner import RunBusy

PlacementFn = Callable[[], Placement]
"""A launcher's job environment (:class:`~ccpo_lab.launch.environment.JobEnvironment`) or
any picklable callable giving the task's placement."""


class RunJob(Checkpointable):
    """Execute one run directory where its launcher placed it; checkpointable.

    ``isolate``: execute the run in a child process that this job supervises
    (:func:`ccpo_lab.runs.execute.supervise`: a ``kill -9`` of the run's process is
    recorded with its signal, and the run outlives this wrapper).
    """

    def __init__(self, run_dir: str | Path, placement: PlacementFn = this_host,
                 isolate: bool = False) -> None:
        self.run_dir = str(Path(run_dir).resolve())
        self.placement = placement
        self.isolate = isolate
        self._requeueing = False

    def __call__(self) -> dict[str, Any]:
        """Execute the run (task 0) or serve it (other tasks); resume from its checkpoint.

        A run another live process executes is left to it (``{"busy": ...}``).
        """
        self._requeueing = False
        where = getattr(self, "placement", this_host)()  # jobs pickled before placements
        if where.is_worker:
            return serve_run(self.run_dir, where)
        if getattr(self, "isolate", False):
            return supervise(self.run_dir, where)
        try:
            return execute_run(self.run_dir, where, requeueing=lambda: self._requeueing)
        except RunBusy as e:
            print(f"{e}; leaving the run to it", flush=True)
            return {"busy": e.owner.describe()}

    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission:
        """Called by submitit on timeout/preemption: resubmit the same run directory.

        Nothing is held in memory: the restarted job resumes from the run's checkpoints.
        """
        self._requeueing = True
        return DelayedSubmission(RunJob(self.run_dir, getattr(self, "placement", this_host),
                                        getattr(self, "isolate", False)))

    def __repr__(self) -> str:
        return f"RunJob({self.run_dir!r})"


def submitit_log_paths(folder: str | Path, job_id: str) -> dict[str, str]:
    """stdout/stderr of task 0 of submitit job ``job_id`` whose executor folder is ``folder``."""
    from submitit.core.utils import JobPaths

    paths = JobPaths(folder, job_id=job_id, task_id=0)
    return {"stdout": str(paths.stdout), "stderr": str(paths.stderr),
            "folder": str(paths.folder)}
