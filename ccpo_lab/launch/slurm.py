"""The ``slurm`` launcher: one submitit job array per sweep, and short scheduler queries.

A sweep larger than the cluster's ``MaxArraySize`` is split into several arrays (one
``sbatch`` call each). Jobs are :class:`~ccpo_lab.launch.job.RunJob` callables: on timeout
or preemption they are requeued (at most ``max_num_timeout`` times) and resume from the
run's checkpoint. The jobs run the interpreter the run needs (:attr:`Needs.python
<ccpo_lab.placement.Needs.python>`: a verl run's ``backend.verl.python``, the trainer
environment), not the one that submitted them. Queries (``sacct``, falling back to
``squeue``) run with a short timeout and never wait for a job.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ccpo_lab.config.launchers.slurm import SlurmSettings
from ccpo_lab.errors import UserError
from ccpo_lab.launch.base import TERMINAL, Launcher, Reconciled, Submission, parallel
from ccpo_lab.launch.environment import SLURM
from ccpo_lab.launch.params import (
    check_cluster,
    chunks,
    max_array_size,
    sbatch_text,
    slurm_parameters,
)
from ccpo_lab.placement import Placement
from ccpo_lab.runs.files import excerpt
from ccpo_lab.runs.layout import RunDir

if TYPE_CHECKING:
    from ccpo_lab.launch.status import RunStatus

T = TypeVar("T")

QUERY_TIMEOUT_S = 5.0
"""Seconds a status query may take before it is abandoned."""

ACTIVE = {"PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "SUSPENDED",
          "RESIZING", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SIGNALING",
          "STAGE_OUT", "STOPPED"}
"""Slurm job states in which a job still holds (or waits for) resources."""
FAILED = {"FAILED", "OUT_OF_MEMORY"}
"""Slurm job states of a job that failed (a non-zero exit, its memory limit): the run is
``failed`` (resubmitted on request)."""
INTERRUPTED = {"TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "PREEMPTED", "REVOKED"}
"""Slurm job states of a job stopped from outside (its time limit after every requeue, a
lost node, preemption): the run is ``interrupted`` and resumes on a relaunch."""
placement_here = SLURM
"""This launcher's job environment under the name jobs pickled before
:mod:`ccpo_lab.launch.environment` refer to."""


@dataclass(frozen=True)
class SlurmSubmission:
    """One ``sbatch`` call: an array (or a single job) and the runs it holds."""

    job_id: str
    """The array's job id (or the job id of a single job)."""
    runs: tuple[str, ...]
    """Run directories, in array-index order."""


class SlurmLauncher(Launcher):
    """Submit run directories as Slurm job arrays (see the module docstring)."""

    kind = "slurm"
    settings_class = SlurmSettings
    environment = SLURM
    max_nodes = None
    scheduled = True

    @property
    def slurm(self) -> SlurmSettings:
        """The settings, typed."""
        assert isinstance(self.settings, SlurmSettings)
        return self.settings

    @property
    def folder(self) -> Any:
        """submitit's folder of the sweep's arrays: ``<sweep>/_jobs/%j``."""
        return self.sweep.jobs.resolve() / "%j"

    def parameters(self) -> dict[str, Any]:
        """submitit ``SlurmExecutor`` parameters, validated (no cluster needed)."""
        return slurm_parameters(self.slurm, job_name=f"ccpo-{self.name}", needs=self.needs)

    def check(self) -> None:
        """The sbatch parameters are valid."""
        super().check()
        self.parameters()

    def prepare(self) -> None:
        """Slurm answers and knows the partition."""
        check_cluster(self.slurm)

    def placement(self) -> Placement:
        """One task per node; the CPUs per task the job asks for."""
        return Placement(ntasks=self.needs.nodes, cpus=self.parameters()["cpus_per_task"])

    def resources(self) -> str:
        """``partition=gpu nodes=1 gpus/node=8 cpus=64 time=2880m mem=900G``."""
        s, n = self.slurm, self.needs
        parts = [f"partition={s.partition or '(default)'}", f"nodes={n.nodes}",
                 f"gpus/node={n.gpus_per_node}",
                 f"cpus={self.parameters()['cpus_per_task']}", f"time={s.time_min}m"]
        if s.mem_gb:
            parts.append(f"mem={s.mem_gb}G")
        return " ".join(parts)

    def parallel_runs(self) -> int:
        """``array_parallelism``."""
        return self.slurm.array_parallelism

    def executor(self, folder: Any, max_num_timeout: int) -> Any:
        """A submitit ``SlurmExecutor`` whose jobs run the run's interpreter
        (:meth:`~ccpo_lab.launch.base.Launcher.job_python`), not the submitting one."""
        from submitit import SlurmExecutor

        return SlurmExecutor(folder=folder, max_num_timeout=max_num_timeout,
                             python=self.job_python())

    def runs_execute_here(self) -> bool:
        """Only inside a Slurm allocation (not on a login node)."""
        return SLURM.active()

    def call_in_job(self, fn: Callable[[Any], T], arg: Any, *, name: str,
                    timeout_min: int = 20) -> tuple[str, T]:
        """One job (not an array) with the sweep's partition, account, QoS, constraint and
        CPUs, one node with the GPUs per node a run needs, ``timeout_min`` minutes, no
        requeue."""
        one = dataclasses.replace(self.slurm, time_min=timeout_min)
        params = slurm_parameters(one, job_name=f"ccpo-{name}-{self.name}",
                                  needs=dataclasses.replace(self.needs, nodes=1))
        params.pop("array_parallelism", None)
        ex = self.executor(self.sweep.jobs.resolve() / name / "%j", max_num_timeout=0)
        ex.update_parameters(**params)
        job = ex.submit(fn, arg)
        return f"slurm job {job.job_id}", job.result()

    def preview(self, n_runs: int) -> list[str]:
        """The batch script of the (first) job array, as submitit will write it: its
        ``#SBATCH`` header with ``--array=0-N%P``, and the command each task runs."""
        import shlex
        import sys

        size = max_array_size()
        arrays = chunks(list(range(n_runs)), size)
        python = self.job_python() or shlex.quote(sys.executable)
        command = (f"{python} -u -m submitit.core._submit "
                   f"{shlex.quote(str(self.folder))}")
        text = sbatch_text(self.parameters(), self.folder, command,
                           map_count=len(arrays[0]) if arrays else 0)
        head = (f"{len(arrays)} job arrays of at most {size} runs; the first one's batch "
                "script:" if len(arrays) > 1 else "the job array's batch script:")
        return [head, *text.rstrip().splitlines()]

    def machine_checks(self) -> list[tuple[str, str, str]]:
        """``sinfo`` answers here and lists the sweep's partition."""
        if shutil.which("sinfo") is None:
            return [("Slurm", "FIX", "sinfo not found: run doctor on a Slurm login node")]
        try:
            r = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True,
                               timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            r = None
        if r is None or r.returncode != 0:
            return [("Slurm", "FIX", "sinfo failed: " + (r.stderr.strip()[:200] if r else
                                                          "timed out"))]
        parts = [p.rstrip("*") for p in r.stdout.split()]
        if self.slurm.partition and self.slurm.partition not in parts:
            return [("Slurm", "FIX", f"partition {self.slurm.partition!r} not in {parts}")]
        return [("Slurm", "ok", f"partitions {', '.join(parts) or '(none)'}")]

    def submit(self, runs: Sequence[RunDir], *, wait: bool) -> Submission:
        """One array per ``MaxArraySize`` chunk; record each run's ``job.json``."""
        subs = self.submit_arrays(runs)
        ids = ", ".join(f"{s.job_id} ({len(s.runs)} runs)" for s in subs)
        return Submission(runs=tuple(runs), job_ids=tuple(s.job_id for s in subs),
                          detached=True,
                          message=f"submitted {len(runs)} runs as {len(subs)} Slurm job "
                                  f"arr{'ays' if len(subs) > 1 else 'ay'}: {ids}")

    def submit_arrays(self, targets: Sequence[RunDir]) -> list[SlurmSubmission]:
        """Submit ``targets`` (one array per ``MaxArraySize`` chunk); record ``job.json``."""
        from submitit.core.utils import FailedJobError

        from ccpo_lab.launch.job import RunJob, submitit_log_paths

        ex = self.executor(self.folder, max_num_timeout=self.slurm.max_num_timeout)
        ex.update_parameters(**self.parameters())
        out: list[SlurmSubmission] = []
        for chunk in chunks(list(targets), max_array_size()):
            try:
                with ex.batch():
                    jobs = [ex.submit(RunJob(rd.path, SLURM)) for rd in chunk]
            except (FailedJobError, OSError) as e:
                done = sum(len(s.runs) for s in out)
                msg = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
                raise UserError(f"sbatch refused the job array: {msg}"
                                + (f" ({done} runs were submitted before it)" if done else ""),
                                key="launcher", detail=None) from None
            array_id = jobs[0].job_id.split("_")[0]

            def record(item: tuple[int, tuple[RunDir, Any]], n: int = len(chunk),
                       array_id: str = array_id) -> None:
                i, (rd, job) = item
                rd.record_job(launcher=self.kind, job_id=job.job_id, array_job_id=array_id,
                              array_index=i if n > 1 else None,
                              **submitit_log_paths(self.folder, job.job_id))

            parallel(record, list(enumerate(zip(chunk, jobs, strict=True))))
            out.append(SlurmSubmission(array_id, tuple(str(rd.path) for rd in chunk)))
        return out

    @classmethod
    def query(cls, jobs: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
        """One ``sacct`` (``squeue``) call for every job id."""
        ids = [str(j["job_id"]) for j in jobs if j.get("job_id")]
        if not ids:
            return {}
        states = query_states(ids)
        return None if states is None else {k: v.get("State", "UNKNOWN")
                                            for k, v in states.items()}

    @classmethod
    def reconcile(cls, file_state: str, job: Mapping[str, Any], sched: str | None,
                  state: Mapping[str, Any]) -> Reconciled:
        """Slurm's view wins where the run could not record what happened to it."""
        if file_state in TERMINAL:
            return Reconciled(file_state, "", sched in ("PENDING", "RUNNING"))
        if sched is None:
            return Reconciled(file_state, "scheduler state unknown", True)
        if sched == "RUNNING":
            return Reconciled("running", "", True)
        if sched in ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"):
            requeued = file_state in ("running", "requeued") or sched != "PENDING"
            return Reconciled("requeued" if requeued else "pending", "", True)
        if sched == "CANCELLED":
            return Reconciled("cancelled", "cancelled in Slurm")
        if sched in FAILED:
            return Reconciled("failed", f"Slurm: {sched}")
        if sched in INTERRUPTED:
            return Reconciled("interrupted", f"Slurm: {sched}; a relaunch resumes it")
        if sched == "COMPLETED":
            return Reconciled("interrupted", "its job ended without the run recording an "
                                             "outcome; a relaunch resumes it")
        if sched == "UNKNOWN":
            return Reconciled(file_state, "not yet known to Slurm", True)
        return Reconciled(file_state, f"Slurm: {sched}", True)

    @classmethod
    def cancel(cls, rows: Sequence[RunStatus]) -> tuple[list[tuple[RunStatus, str]], list[str]]:
        """One ``scancel`` for every queued or running job whose id is a Slurm job id (an
        id read from ``job.json`` that is not one never reaches a command line)."""
        problems = [f"{r.arm} seed {r.seed}: {r.path / 'job.json'}: job_id "
                    f"{excerpt(str(r.job_id))!r} is not a Slurm job id: not cancelled"
                    for r in rows if r.live and r.job_id and not valid_job_id(str(r.job_id))]
        live = [r for r in rows if r.live and r.job_id and valid_job_id(str(r.job_id))]
        if live:
            ok, msg = cancel_jobs([str(r.job_id) for r in live])
            if not ok:
                problems.append(f"scancel failed: {msg}")
        return [(r, f"scancel {r.job_id}" if r in live else "marked cancelled")
                for r in rows], problems


# ---------------------------------------------------------------- queries
def _run(cmd: list[str]) -> str | None:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S,
                           check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def _expand(job_id: str) -> list[str]:
    """``123_[0-3%2]`` -> ``123_0 .. 123_3``; ``123_4`` and ``123`` unchanged."""
    from submitit.slurm.slurm import read_job_id

    try:
        parts = read_job_id(job_id)
    except (ValueError, IndexError):
        return [job_id]
    out: list[str] = []
    for p in parts:
        if len(p) >= 3:
            out.extend(f"{p[0]}_{i}" for i in range(int(p[1]), int(p[2]) + 1))
        else:
            out.append("_".join(p[:2]))
    return out


def query_states(job_ids: Iterable[str]) -> dict[str, dict[str, str]] | None:
    """Scheduler state of each job id (``123`` or ``123_4``): ``{"State": ..., ...}``.

    One ``sacct`` call (``squeue`` if accounting does not answer), at most
    :data:`QUERY_TIMEOUT_S` seconds; ``None`` when the scheduler cannot be asked.
    """
    wanted = sorted({str(j) for j in job_ids if j and valid_job_id(str(j))})
    if not wanted:
        return {}
    roots = sorted({j.split("_")[0] for j in wanted})
    out: dict[str, dict[str, str]] = {}
    text = _run(["sacct", "-X", "-n", "-P", "-o", "JobID,State,Start,End,Elapsed,NodeList",
                 "-j", ",".join(roots)])
    if text is not None:
        for line in text.splitlines():
            cols = line.split("|")
            if len(cols) < 6 or not cols[0]:
                continue
            state = cols[1].split()[0] if cols[1] else "UNKNOWN"
            info = {"State": state, "Start": cols[2], "End": cols[3], "Elapsed": cols[4],
                    "NodeList": cols[5]}
            for jid in _expand(cols[0]):
                out[jid] = info
    squeue = _run(["squeue", "-h", "-o", "%i|%T", "-j", ",".join(roots)])
    if squeue is not None:
        for line in squeue.splitlines():
            jid, _, state = line.partition("|")
            for j in _expand(jid.strip()):
                # squeue is current (sacct can lag slurmdbd by a few seconds), except that a
                # requeued job shows COMPLETING while its old instance is being killed
                st = state.strip() or "UNKNOWN"
                if st == "COMPLETING" and out.get(j, {}).get("State") == "REQUEUED":
                    continue
                out[j] = {**out.get(j, {}), "State": st}
    if text is None and squeue is None:
        return None
    return out


JOB_ID = re.compile(r"[0-9]+(_[0-9]+)?")
"""A Slurm job id as ccpo-lab records one: ``123`` or an array task ``123_4``."""


def valid_job_id(job_id: str) -> bool:
    """Whether ``job_id`` (read from a file) is a Slurm job id (:data:`JOB_ID`)."""
    return isinstance(job_id, str) and JOB_ID.fullmatch(job_id) is not None


def cancel_jobs(job_ids: Sequence[str]) -> tuple[bool, str]:
    """``scancel -- <ids>`` in one call, for the ids that are Slurm job ids (the others
    are named in the message and not passed). Returns (ok, message)."""
    bad = [j for j in job_ids if not valid_job_id(j)]
    good = [j for j in job_ids if valid_job_id(j)]
    msg = "; ".join(f"{excerpt(j)!r} is not a Slurm job id: not passed to scancel"
                    for j in bad)
    if not good:
        return not bad, msg
    try:
        r = subprocess.run(["scancel", "--", *good], capture_output=True, text=True,
                           timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, "; ".join(x for x in (msg, str(e)) if x)
    out = (r.stderr or r.stdout).strip()
    return r.returncode == 0 and not bad, "; ".join(x for x in (msg, out) if x)
