"""Job environments: where a task of a run executes, read from its launcher's environment
variables (the job-environment role of a launcher, after submitit's ``JobEnvironment``).

Each launcher declares one :class:`JobEnvironment`, a table from environment variables to
:class:`~ccpo_lab.placement.Placement`: the variable that says a process is inside such a
job, submitit's ``JobEnvironment`` for the hosts, rank and task count (``None``: this
machine, one task), the variable whose presence makes the job id known, and the counts
read from variables (``cpus``, ``restarts``; a value that is not a count leaves the
field's default). The GPU slice is ``CUDA_VISIBLE_DEVICES`` everywhere. An environment is
called (``SLURM()``) to read the placement, and is picklable, so a
:class:`~ccpo_lab.launch.job.RunJob` carries it to the node.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass

from ccpo_lab.placement import Placement, this_host, visible_gpus


@dataclass(frozen=True)
class JobEnvironment:
    """How one launcher's jobs describe themselves through environment variables."""

    kind: str
    """The launcher kind whose jobs these are."""
    marker: tuple[str, str | None] | None = None
    """``(variable, value)`` set inside such a job (value None: any); None: never told
    apart from any other process (the ``inline`` launcher's jobs run in the calling
    process)."""
    submitit: str | None = None
    """``"module:Class"`` of submitit's job environment giving hosts, rank and task count
    (None: this machine, one task)."""
    job_id_from: str | None = None
    """The variable whose presence makes submitit's job id this job's (None: no id)."""
    counts: tuple[tuple[str, str], ...] = ()
    """``(Placement field, variable)`` pairs of counts read as integers."""

    def active(self, env: Mapping[str, str] | None = None) -> bool:
        """Whether this process runs inside one of these jobs."""
        if self.marker is None:
            return False
        value = (os.environ if env is None else env).get(self.marker[0])
        return value is not None and (self.marker[1] is None or value == self.marker[1])

    def __call__(self) -> Placement:
        """The placement of this task, from this process's environment."""
        if self.submitit is None:
            return this_host()
        module, _, attr = self.submitit.partition(":")
        env = getattr(importlib.import_module(module), attr)()
        defaults = Placement()
        counts = {}
        for name, var in self.counts:
            text = os.environ.get(var, "")
            counts[name] = int(text) if text.isdigit() else getattr(defaults, name)
        job_id = env.job_id if self.job_id_from and os.environ.get(self.job_id_from) else None
        return dataclasses.replace(
            defaults, hosts=tuple(env.hostnames), rank=env.global_rank, ntasks=env.num_tasks,
            gpus=visible_gpus(), job_id=job_id, **counts)


INLINE = JobEnvironment("inline")
"""The ``inline`` launcher: this process, on this machine."""

LOCAL = JobEnvironment("local", marker=("SUBMITIT_EXECUTOR", "local"),
                       submitit="submitit.local.local:LocalJobEnvironment",
                       job_id_from="SUBMITIT_LOCAL_JOB_ID")
"""A job of submitit's local executor: this machine, its task and GPU slice."""

SLURM = JobEnvironment("slurm", marker=("SLURM_JOB_ID", None),
                       submitit="submitit.slurm.slurm:SlurmJobEnvironment",
                       job_id_from="SLURM_JOB_ID",
                       counts=(("cpus", "SLURM_CPUS_PER_TASK"),
                               ("restarts", "SLURM_RESTART_COUNT")))
"""A Slurm job: the allocation's hosts, this task's rank, the task count, the GPU slice,
the CPUs per task and the requeue count."""
