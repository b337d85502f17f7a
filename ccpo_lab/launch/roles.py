"""A launcher's roles as small protocols (after submitit's ``Executor``, ``Job`` and
``JobEnvironment``): what ccpo-lab asks of a launcher, one question at a time.

- :class:`Executor`: an instance for one sweep: submit runs, the placement a run gets,
  a preview for ``sweep --dry-run``;
- :class:`Tracker`: from a run's ``job.json`` alone (class methods): one batched query
  per kind, the state to show, cancelling; :class:`~ccpo_lab.launch.watcher.QueryWatcher`
  adds the back-off between queries of a watch loop;
- :class:`~ccpo_lab.launch.environment.JobEnvironment`: inside the job, a table from
  environment variables to :class:`~ccpo_lab.placement.Placement`;
- :class:`DoctorChecks` (optional): is this machine ready, and a call inside a job.

:class:`~ccpo_lab.launch.base.Launcher` implements all four with defaults; a new launcher
overrides what its scheduler needs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ccpo_lab.launch.environment import JobEnvironment
from ccpo_lab.placement import Placement

if TYPE_CHECKING:
    from ccpo_lab.launch.base import Monitor, Reconciled, Submission
    from ccpo_lab.launch.status import RunStatus
    from ccpo_lab.runs.layout import RunDir

T = TypeVar("T")

__all__ = ["DoctorChecks", "Executor", "JobEnvironment", "Tracker"]


class Executor(Protocol):
    """Submits a sweep's runs and says what each gets."""

    def check(self) -> None:
        """Refuse needs the launcher cannot meet (nothing is asked of the machine)."""

    def prepare(self) -> None:
        """Checks against the machine or cluster, right before submitting."""

    def placement(self) -> Placement:
        """The placement a run's task 0 will get, as planned (no hosts yet)."""

    def resources(self) -> str:
        """One line: what each run is given."""

    def parallel_runs(self) -> int:
        """How many runs may execute at once."""

    def preview(self, n_runs: int) -> list[str]:
        """What submitting ``n_runs`` runs would submit (``sweep --dry-run``)."""

    def submit(self, runs: Sequence[RunDir], *, wait: bool) -> Submission:
        """Submit ``runs``; record each run's ``job.json``."""

    def wait(self, submission: Submission, monitor: Monitor) -> None:
        """Return once every run is finished, showing ``monitor``."""


class Tracker(Protocol):
    """Follows runs from their ``job.json`` records (a launcher class: class methods)."""

    scheduled: bool
    """Whether jobs have a scheduler state (:meth:`query` asks it)."""

    def query(self, jobs: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
        """The scheduler's state of each job id, in one short query (None: cannot ask)."""

    def reconcile(self, file_state: str, job: Mapping[str, Any], sched: str | None,
                  state: Mapping[str, Any]) -> Reconciled:
        """The state to show from the run's own record and the scheduler's."""

    def job_label(self, job: Mapping[str, Any], state: Mapping[str, Any]) -> str | None:
        """The job id shown for a run."""

    def cancel(self, rows: Sequence[RunStatus]
               ) -> tuple[list[tuple[RunStatus, str]], list[str]]:
        """Withdraw the unfinished ``rows`` from the scheduler: ``[(row, how)]``, problems."""


class DoctorChecks(Protocol):
    """What ``ccpo-lab doctor`` asks of a launcher (optional: the base has defaults)."""

    def machine_checks(self) -> list[tuple[str, str, str]]:
        """``(name, ok|FIX|skip, detail)`` lines: is this machine ready to launch?"""

    def runs_execute_here(self) -> bool:
        """Whether the runs execute on this machine (False on a Slurm login node)."""

    def job_python(self) -> str | None:
        """The interpreter command a job starts (None: this one)."""

    def call_in_job(self, fn: Callable[[Any], T], arg: Any, *, name: str,
                    timeout_min: int = 20) -> tuple[str, T]:
        """``fn(arg)`` inside a one-node job, where a run would execute."""
