"""The launcher base: one class with a default for every role a launcher plays.

The roles are small protocols (:mod:`ccpo_lab.launch.roles`, after submitit's
``Executor`` / ``Job`` / ``JobEnvironment``): an **executor** (an instance, built from its
typed settings, the sweep directory and the run's :class:`~ccpo_lab.placement.Needs`:
:meth:`Launcher.submit`, :meth:`Launcher.placement`, :meth:`Launcher.preview`), a **tracker**
(class methods, from a run's ``job.json`` alone, so ``status`` and ``cancel`` need nothing
but the sweep directory: :meth:`Launcher.query`, :meth:`Launcher.reconcile`,
:meth:`Launcher.cancel`), a **job environment** (:attr:`Launcher.environment`, a table of
:mod:`ccpo_lab.launch.environment` that says where a task runs inside the job) and,
optionally, **doctor checks** (:meth:`Launcher.machine_checks`, :meth:`Launcher.call_in_job`).

Launchers are found by kind through :mod:`ccpo_lab.launch.registry`; nothing else in
ccpo-lab asks which kind it holds.
"""

from __future__ import annotations

import shlex
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from ccpo_lab.config.launcher import LauncherSettings
from ccpo_lab.errors import UserError
from ccpo_lab.launch.environment import INLINE, JobEnvironment
from ccpo_lab.placement import Needs, Placement
from ccpo_lab.runs.layout import RunDir, SweepDir

if TYPE_CHECKING:
    from ccpo_lab.launch.status import RunStatus

T = TypeVar("T")

TERMINAL = ("completed", "failed", "cancelled", "interrupted")
"""Run states after which nothing more happens without a relaunch (a relaunch resumes
cancelled and interrupted runs, and failed ones on request)."""


def parallel(fn: Callable[[Any], T], items: Sequence[Any], workers: int = 8) -> list[T]:
    """``[fn(x) for x in items]`` on a few threads (run-directory writes wait on fsync)."""
    if len(items) < 4:
        return [fn(x) for x in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(workers, len(items))) as ex:
        return list(ex.map(fn, items))


@dataclass(frozen=True)
class Reconciled:
    """A run's state as shown, from its own record and its launcher's view."""

    state: str
    """pending, running, completed, failed, cancelled, interrupted or requeued."""
    note: str = ""
    """Why it differs from the run's own record, and similar hints."""
    live: bool = False
    """A job or process is queued or running for the run."""


@dataclass(frozen=True)
class Submission:
    """What :meth:`Launcher.submit` did."""

    runs: tuple[RunDir, ...]
    """The runs submitted."""
    job_ids: tuple[str, ...] = ()
    """Scheduler ids (Slurm arrays); () when the runs have none."""
    message: str = ""
    """One line for the user (what was started, where its logs are)."""
    detached: bool = False
    """The runs execute elsewhere: the caller may return without waiting."""
    record: Mapping[str, Any] = field(default_factory=dict)
    """Extra fields of the sweep manifest's submission record (pids, queue, slots)."""
    handle: Any = None
    """Launcher-private state :meth:`Launcher.wait` needs (not serialised)."""


class Monitor(Protocol):
    """What a launcher's :meth:`~Launcher.wait` shows while runs execute (the caller's)."""

    def start(self, auto_refresh: bool = False) -> None:
        """Start a live display at a terminal (``auto_refresh``: it re-reads the runs
        itself, for a caller that blocks)."""

    def stop(self) -> None:
        """Stop the live display."""

    def refresh(self) -> bool:
        """Re-read the runs and update the display; True once every run is finished."""

    def note(self, text: str) -> None:
        """A progress line (printed only when there is no live display)."""

    def is_live(self) -> bool:
        """Whether a live display is showing (a terminal)."""


class Launcher(ABC):
    """Executes the runs of a sweep somewhere; see the module docstring.

    A subclass sets :attr:`kind` and :attr:`settings_class`, implements :meth:`submit`
    and :meth:`placement`, overrides the trackers its scheduler needs, and sets
    :attr:`environment` (what its jobs pass to :class:`~ccpo_lab.launch.job.RunJob`). It
    is found through :mod:`ccpo_lab.launch.registry` (an entry point).
    """

    kind: ClassVar[str]
    """Registry name (``launcher.kind``)."""
    settings_class: ClassVar[type[LauncherSettings]]
    """The frozen dataclass of this kind's settings."""
    max_nodes: ClassVar[int | None] = 1
    """Most nodes one run may span under this launcher (None: no limit)."""
    poll_s: ClassVar[float] = 2.0
    """Seconds between two looks at the runs while waiting."""
    scheduled: ClassVar[bool] = False
    """Whether jobs have a scheduler state (:meth:`query` asks it)."""
    environment: ClassVar[JobEnvironment] = INLINE
    """Where a task runs inside one of this launcher's jobs (a hand-written job script
    included); the default: this process, never told apart from any other."""

    def __init__(self, settings: LauncherSettings, sweep_dir: str | Path, *, name: str,
                 needs: Needs) -> None:
        if not isinstance(settings, self.settings_class):
            raise TypeError(f"{type(self).__name__} needs {self.settings_class.__name__}, "
                            f"got {type(settings).__name__}")
        self.settings = settings
        """This kind's settings."""
        self.sweep = SweepDir(Path(sweep_dir))
        """The sweep's results directory."""
        self.name = name
        """The sweep's name (job names)."""
        self.needs = needs
        """What each run needs, as its backend declares it."""

    # ------------------------------------------------------------ before anything is written
    def check(self) -> None:
        """Refuse needs this launcher cannot meet (no machine is asked; ``--dry-run`` too)."""
        if self.max_nodes is not None and self.needs.nodes > self.max_nodes:
            raise UserError(f"a run needs {self.needs.nodes} nodes (its backend says so), and "
                            f"the {self.kind} launcher gives at most {self.max_nodes}",
                            key="launcher.kind", value=self.kind,
                            valid="a launcher that spans nodes (slurm)")

    def prepare(self) -> None:  # noqa: B027 - optional hook, nothing to check by default
        """Checks against this machine or cluster, right before submitting (nothing is
        written yet)."""

    @abstractmethod
    def placement(self) -> Placement:
        """The placement a run's task 0 will get, as planned (no hosts yet): what the
        backend's dry-run command is built from."""

    @abstractmethod
    def resources(self) -> str:
        """One line: what each run is given (``plan`` and ``sweep`` print it)."""

    def parallel_runs(self) -> int:
        """How many runs may execute at once."""
        return 1

    def preview(self, n_runs: int) -> list[str]:
        """What submitting ``n_runs`` runs would submit, for ``sweep --dry-run`` (a batch
        script, a pool); nothing is asked of the machine or cluster."""
        return []

    def machine_checks(self) -> list[tuple[str, str, str]]:
        """``(name, ok|FIX|skip, detail)`` lines for ``ccpo-lab doctor``: is this machine
        ready to launch with these settings?"""
        return [(f"{self.kind} launcher", "ok", self.resources())]

    def runs_execute_here(self) -> bool:
        """Whether this process is on a machine where the runs execute (False on a Slurm
        login node: what ``doctor`` finds about GPUs or data here says nothing about the
        runs; :meth:`call_in_job` asks where they execute)."""
        return True

    def job_python(self) -> str | None:
        """The interpreter command a job of this launcher starts (shell-quoted): the run's
        (:attr:`Needs.python <ccpo_lab.placement.Needs.python>`), else None (submitit's
        default: this interpreter)."""
        return shlex.quote(self.needs.python) if self.needs.python else None

    def call_in_job(self, fn: Callable[[Any], T], arg: Any, *, name: str,
                    timeout_min: int = 20) -> tuple[str, T]:
        """``fn(arg)`` inside a one-node job of this launcher, where a run would execute
        (its settings, one node with the GPUs a run needs, the run's interpreter, at most
        ``timeout_min`` minutes); waits for it. Returns (where it ran, what ``fn``
        returned). Job files go to ``<sweep>/_jobs/<name>/``. This default calls it here,
        in this process (``inline``)."""
        return f"here (launcher {self.kind})", fn(arg)

    # ------------------------------------------------------------ submitting
    @abstractmethod
    def submit(self, runs: Sequence[RunDir], *, wait: bool) -> Submission:
        """Submit ``runs`` (any runs of the sweep, e.g. seeds added later); record each
        run's ``job.json``. With ``wait`` the caller then calls :meth:`wait`."""

    def wait(self, submission: Submission, monitor: Monitor) -> None:
        """Return once every run is finished, showing ``monitor``. Ctrl-C
        (``KeyboardInterrupt``) propagates: for a detached submission the caller stops
        watching and the runs go on."""
        monitor.start()
        try:
            while not monitor.refresh():
                time.sleep(self.poll_s)
        finally:
            monitor.stop()

    # ------------------------------------------------------------ tracking, from job.json
    @classmethod
    def query(cls, jobs: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
        """The scheduler's state of each job id of ``jobs`` (records of ``job.json``), in one
        short query; {} when the scheduler has nothing to say, None when it cannot be asked."""
        return {}

    @classmethod
    def reconcile(cls, file_state: str, job: Mapping[str, Any], sched: str | None,
                  state: Mapping[str, Any]) -> Reconciled:
        """The state to show, from the run's own ``state.json`` (``file_state``, ``state``),
        its ``job.json`` record and the scheduler's state of its job (``sched``).

        Asked only when no live process holds the run's ownership lock
        (:mod:`ccpo_lab.runs.owner`; a held lock is shown ``running`` without asking): a
        run the file says is running has then lost its executor, unless the scheduler
        knows better (a job starting, a file system without locks)."""
        if file_state in TERMINAL:
            return Reconciled(file_state)
        if file_state in ("running", "requeued"):
            return Reconciled("interrupted", gone(state))
        return Reconciled(file_state, "" if file_state == "pending" else "no launcher record")

    @classmethod
    def job_label(cls, job: Mapping[str, Any], state: Mapping[str, Any]) -> str | None:
        """The job id shown for a run (None: none)."""
        value = job.get("job_id")
        return None if value is None else str(value)

    @classmethod
    def cancel(cls, rows: Sequence[RunStatus]) -> tuple[list[tuple[RunStatus, str]], list[str]]:
        """Withdraw the unfinished ``rows`` of this launcher from its scheduler (dequeue,
        ``scancel``). Returns ``[(row, how)]`` and problems. The caller then stops each
        run's executor on this host (SIGINT, then SIGKILL after a grace period: see
        :mod:`ccpo_lab.launch.cancel`) and marks the run ``cancelled``."""
        return [(r, "marked cancelled") for r in rows], []


def gone(state: Mapping[str, Any]) -> str:
    """Why a run recorded as running is not: its executor is gone (with the pid)."""
    pid = state.get("pid")
    host = state.get("host")
    who = f"executor pid {pid}" if pid else "its executor"
    if host and host != socket.gethostname():
        who += f" on {host}"
    return f"{who} gone without recording an outcome; a relaunch resumes it"
