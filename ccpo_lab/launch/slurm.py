"""The ``slurm`` launcher: one submitit job array per sweep, and short scheduler queries.

A sweep larger than the cluster's ``MaxArraySize`` is split into several arrays (one
``sbatch`` call each). Jobs are :class:`~ccpo_lab.launch.job.RunJob` callables: on timeout
or preemption they are requeued (at most ``max_num_timeout`` times) and resume from the
run's checkpoint. Queries (``sacct``, falling back to ``squeue``) run with a short timeout
and never wait for a job.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.config.sweep import Sweep
from ccpo_lab.errors import UserError
from ccpo_lab.launch.job import RunJob, record_job, submitit_log_paths
from ccpo_lab.launch.manifest import JOBS_DIR
from ccpo_lab.launch.params import (
    check_cluster,
    chunks,
    max_array_size,
    slurm_parameters,
)
from ccpo_lab.runs.layout import RunDir

QUERY_TIMEOUT_S = 5.0
"""Seconds a status query may take before it is abandoned."""

ACTIVE = {"PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "SUSPENDED",
          "RESIZING", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SIGNALING",
          "STAGE_OUT", "STOPPED"}
"""Slurm job states in which a job still holds (or waits for) resources."""


@dataclass(frozen=True)
class SlurmSubmission:
    """One ``sbatch`` call: an array (or a single job) and the runs it holds."""

    job_id: str
    """The array's job id (or the job id of a single job)."""
    runs: tuple[str, ...]
    """Run directories, in array-index order."""


def job_python(sw: Sweep) -> str | None:
    """The interpreter command the sweep's jobs run (shell-quoted), or None for this one.

    A verl sweep's jobs run ``backend.verl.python`` (the trainer environment, where
    ccpo-lab is installed the way ``ccpo_lab.integrations.trainer_env`` says), not whatever
    interpreter submitted them.
    """
    import shlex

    backend = sw.config.backend
    return shlex.quote(backend.verl.python) if backend.kind == "verl" else None


class SlurmLauncher:
    """Submit run directories as Slurm job arrays; everything is validated on construction."""

    def __init__(self, sw: Sweep, sweep_dir: Path) -> None:
        self.launcher = sw.config.launcher
        self.params = slurm_parameters(self.launcher, job_name=f"ccpo-{sw.name}")
        check_cluster(self.launcher)
        self.max_array = max_array_size()
        self.folder = Path(sweep_dir).resolve() / JOBS_DIR / "%j"
        self.python = job_python(sw)

    def submit(self, targets: Sequence[RunDir]) -> list[SlurmSubmission]:
        """Submit ``targets`` (one array per ``MaxArraySize`` chunk); record ``job.json``."""
        from submitit import SlurmExecutor
        from submitit.core.utils import FailedJobError

        from ccpo_lab.launch.submit import parallel

        ex = SlurmExecutor(folder=self.folder, max_num_timeout=self.launcher.max_num_timeout,
                           python=self.python)
        ex.update_parameters(**self.params)
        out: list[SlurmSubmission] = []
        for chunk in chunks(list(targets), self.max_array):
            try:
                with ex.batch():
                    jobs = [ex.submit(RunJob(rd.path)) for rd in chunk]
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
                record_job(rd, launcher="slurm", job_id=job.job_id, array_job_id=array_id,
                           array_index=i if n > 1 else None,
                           **submitit_log_paths(self.folder, job.job_id))

            parallel(record, list(enumerate(zip(chunk, jobs, strict=True))))
            out.append(SlurmSubmission(array_id, tuple(str(rd.path) for rd in chunk)))
        return out


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
    out = []
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
    wanted = sorted({str(j) for j in job_ids if j})
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


def cancel_jobs(job_ids: Sequence[str]) -> tuple[bool, str]:
    """``scancel`` the given job ids in one call. Returns (ok, message)."""
    if not job_ids:
        return True, ""
    try:
        r = subprocess.run(["scancel", *job_ids], capture_output=True, text=True,
                           timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    return r.returncode == 0, (r.stderr or r.stdout).strip()


def job_info(record: dict[str, Any]) -> str:
    """Short description of a Slurm job record for messages."""
    return f"slurm job {record.get('job_id')}"
