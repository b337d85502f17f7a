"""The ``local`` launcher: submitit's local executor on one machine, with a slot pool.

Each run gets the GPUs its backend needs (``launcher.gpus_per_run`` may give a CPU run a
slice too) as its own ``CUDA_VISIBLE_DEVICES`` slice (submitit's ``visible_gpus`` /
``gpus_per_node``); concurrently running runs never share a slice, not even runs of two
sweeps launched separately: a run starts only once it holds the machine-wide locks of its
slice (:mod:`ccpo_lab.runs.gpulock`), and one of its sweep's ``max_parallel`` slot locks.
Runs that need no GPU get CPU slots (``CUDA_VISIBLE_DEVICES`` empty). The locks are
handed to the processes that execute the run (:mod:`ccpo_lab.launch.heldjob`): a killed
pool's runs go on holding their GPUs and slots, and a relaunch waits for them. The
machine's GPUs are ``$CCPO_LAB_NUM_GPUS`` (a count), else ``$CUDA_VISIBLE_DEVICES``, else
the ``nvidia-smi -L`` count, else none.

The slots are :mod:`ccpo_lab.launch.slots`'s; the pool runs in a detached process
(:mod:`ccpo_lab.launch.pool`, its own session) that survives the terminal; its queue file
and log live in ``<sweep dir>/_jobs/``. ``--wait`` only watches it: Ctrl-C or a closed
terminal stops the watching, never the runs. Each job supervises its run in a child process
(:func:`ccpo_lab.runs.execute.supervise`), so a run killed from outside is recorded with
its signal, and a run whose job wrapper dies goes on.
Each run's job runs the interpreter the run needs (:attr:`Needs.python
<ccpo_lab.placement.Needs.python>`: a verl run's ``backend.verl.python``), as under Slurm,
so a run executes the same code under both launchers; the pool itself runs this one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ccpo_lab.config.launchers.local import LocalSettings
from ccpo_lab.errors import UserError
from ccpo_lab.launch.base import TERMINAL, Launcher, Reconciled, Submission, gone, parallel
from ccpo_lab.launch.environment import LOCAL
from ccpo_lab.launch.pool import controller_alive, pool_alive, queue_pid, spawn_pool
from ccpo_lab.launch.slots import detect_gpus, gpu_slots, per_run_gpus, slot_text
from ccpo_lab.placement import Placement
from ccpo_lab.runs.layout import RunDir

if TYPE_CHECKING:
    from ccpo_lab.launch.status import RunStatus

T = TypeVar("T")

placement_here = LOCAL
"""This launcher's job environment under the name jobs pickled before
:mod:`ccpo_lab.launch.environment` refer to."""


class LocalLauncher(Launcher):
    """A slot pool on this machine (see the module docstring)."""

    kind = "local"
    settings_class = LocalSettings
    environment = LOCAL
    poll_s = 1.0

    @property
    def local(self) -> LocalSettings:
        """The settings, typed."""
        assert isinstance(self.settings, LocalSettings)
        return self.settings

    def check(self) -> None:
        """One node; a run that needs GPUs gets exactly what it needs."""
        super().check()
        given, need = self.local.gpus_per_run, self.needs.gpus
        if given is not None and need and given != need:
            raise UserError(f"launcher.gpus_per_run ({given}) must equal the {need} GPUs a "
                            "run needs (its backend states them), or be left out",
                            key="launcher.gpus_per_run", value=given, valid=[need])

    def slots(self) -> list[tuple[int, ...]]:
        """The pool's slots on this machine (:class:`UserError` if it lacks the GPUs)."""
        return gpu_slots(self.local, detect_gpus(), self.needs)

    def prepare(self) -> None:
        """This machine has the GPUs of at least one slot."""
        self.slots()

    def placement(self) -> Placement:
        """One task on this machine; its slice is known when it starts."""
        return Placement()

    def resources(self) -> str:
        """``2 GPU, 4 at once`` / ``1 CPU slot, 2 at once``."""
        g = per_run_gpus(self.local, self.needs)
        return f"{f'{g} GPU' if g else '1 CPU slot'}, {self.local.max_parallel} at once"

    def parallel_runs(self) -> int:
        """``max_parallel``."""
        return self.local.max_parallel

    def call_in_job(self, fn: Callable[[Any], T], arg: Any, *, name: str,
                    timeout_min: int = 20) -> tuple[str, T]:
        """One job of submitit's local executor with a run's GPU slice size, run by the
        run's interpreter (no slot lock: it does not wait for a sweep's runs)."""
        from submitit import LocalExecutor

        ex = LocalExecutor(folder=self.sweep.jobs.resolve() / name / "%j", max_num_timeout=0,
                           python=self.job_python())
        ex.update_parameters(timeout_min=timeout_min,
                             gpus_per_node=per_run_gpus(self.local, self.needs))
        job = ex.submit(fn, arg)
        return f"local job {job.job_id}", job.result()

    def preview(self, n_runs: int) -> list[str]:
        """The pool that would start (its slots are known once this machine is asked)."""
        g = per_run_gpus(self.local, self.needs)
        slots = f"{g} GPU(s)" if g else "a CPU slot"
        return [f"a detached pool (its queue and log in {self.sweep.jobs}/) running {n_runs} "
                f"runs, at most {self.local.max_parallel} at once, each on {slots} under "
                "submitit's local executor (logs: <run>/logs/)"]

    def machine_checks(self) -> list[tuple[str, str, str]]:
        """This machine's slots for the sweep."""
        try:
            slots = self.slots()
        except UserError as e:
            return [("local launcher", "FIX", str(e))]
        return [("local launcher", "ok", f"{len(slots)} slot(s): {slot_text(slots)}")]

    def submit(self, runs: Sequence[RunDir], *, wait: bool) -> Submission:
        """A detached pool (``wait`` or not: waiting only watches it)."""
        slots = self.slots()
        dirs = [str(rd.path.resolve()) for rd in runs]
        text = slot_text(slots)
        record: dict[str, Any] = {"slots": [list(s) for s in slots]}
        # job.json names the queue before the pool starts, so the pool's updates come after.
        pid, queue, log = spawn_pool(self.sweep.path, dirs, slots, before_start=lambda q: (
            parallel(lambda rd: rd.record_job(launcher=self.kind, pool_queue=str(q)), runs)),
            python=self.job_python())
        return Submission(runs=tuple(runs), detached=True,
                          record={"pool_pid": pid, "queue": str(queue), **record},
                          message=f"started a local pool (pid {pid}) for {len(runs)} runs on "
                                  f"{len(slots)} slots ({text}); pool log: {log}")

    @classmethod
    def reconcile(cls, file_state: str, job: Mapping[str, Any], sched: str | None,
                  state: Mapping[str, Any]) -> Reconciled:
        """(No process holds the run.) A run recorded running lost its executor: it is
        interrupted. A pending run is queued while its pool lives (or its job starts)."""
        if file_state in TERMINAL:
            return Reconciled(file_state)
        if file_state in ("running", "requeued"):
            return Reconciled("interrupted", gone(state))
        if job.get("pid") is not None and controller_alive(job["pid"]):
            return Reconciled("pending", "", True)  # its job is starting
        pool = job.get("pool_pid") or queue_pid(job.get("pool_queue"))
        if job.get("pid") is None and pool is not None and pool_alive(pool):
            return Reconciled("pending", "", True)
        return Reconciled("pending", "not queued: a relaunch submits it")

    @classmethod
    def cancel(cls, rows: Sequence[RunStatus]) -> tuple[list[tuple[RunStatus, str]], list[str]]:
        """A queued run is dequeued (its pool skips a cancelled run); a running one is
        interrupted by the caller (SIGINT to the process that holds it)."""
        return [(r, "dequeued" if r.live and r.state == "pending" else "marked cancelled")
                for r in rows], []
