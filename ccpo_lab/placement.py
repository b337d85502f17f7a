"""The placement contract between backends and launchers.

A backend declares what one run **needs** (:class:`Needs`: nodes, GPUs per node, CPUs,
the interpreter its job runs), computed from its own settings, the one place these are
stated. A launcher
**provides** where each task of the run executes (:class:`Placement`: the allocation's
hosts, this task's rank, the task count, its GPU slice, its CPUs), the way submitit's
``JobEnvironment`` describes a job from the inside. Backends read nothing else about
their surroundings: no scheduler variable, no launcher setting.

Launchers build a :class:`Placement` twice: planned (:meth:`Launcher.placement
<ccpo_lab.launch.base.Launcher.placement>`, for ``sweep --dry-run``; no hosts yet) and
inside the job (the launcher's job environment, :mod:`ccpo_lab.launch.environment`, from
its scheduler's variables), so a dry run shows the command the job will run.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass


@dataclass(frozen=True)
class Needs:
    """What one run needs, as its backend declares it."""

    nodes: int = 1
    """Nodes the run spans (one task per node)."""
    gpus_per_node: int = 0
    """GPUs each node must give the run (0: a CPU run)."""
    cpus: int | None = None
    """CPUs the run's task needs at least on each node (None: no stated need)."""
    python: str | None = None
    """The interpreter the run's job executes (the verl backend: ``backend.verl.python``,
    the trainer environment); None: the one that submits (``sys.executable``). Launchers
    that start a process for the job (``local``, ``slurm``) start this one; ``inline``
    runs its jobs in the calling process."""

    @property
    def gpus(self) -> int:
        """GPUs of the whole run (``nodes x gpus_per_node``)."""
        return self.nodes * self.gpus_per_node

    def describe(self) -> str:
        """``2 nodes x 8 GPUs`` / ``1 node, CPU``."""
        nodes = f"{self.nodes} node{'s' if self.nodes != 1 else ''}"
        what = f"{nodes} x {self.gpus_per_node} GPUs" if self.gpus_per_node else f"{nodes}, CPU"
        return what + (f", >= {self.cpus} CPUs" if self.cpus else "")


@dataclass(frozen=True)
class Placement:
    """Where one task of a run executes, as its launcher provides it."""

    hosts: tuple[str, ...] = ()
    """Hosts of the run's allocation, the node of rank 0 first; () in a plan (not yet
    known)."""
    rank: int = 0
    """This task's global rank (0 executes the run; the others serve it)."""
    ntasks: int = 1
    """Tasks of the job (one per node in a multi-node job)."""
    gpus: tuple[int, ...] | None = None
    """The GPU slice visible to this task (``CUDA_VISIBLE_DEVICES``); None: not restricted
    by the launcher."""
    cpus: int | None = None
    """CPUs the launcher allocated to this task; None: not restricted (the machine's)."""
    job_id: str | None = None
    """The scheduler's id of this job (None: not scheduled)."""
    restarts: int = 0
    """How often the scheduler restarted this job (requeues)."""

    @property
    def is_worker(self) -> bool:
        """Whether this task serves rank 0 instead of executing the run itself."""
        return self.rank > 0


def visible_gpus(env: dict[str, str] | None = None) -> tuple[int, ...] | None:
    """The GPU indices of ``CUDA_VISIBLE_DEVICES`` (None when unset or not numeric)."""
    value = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    ids = [x.strip() for x in value.split(",") if x.strip()]
    return tuple(int(x) for x in ids) if all(x.isdigit() for x in ids) else None


def this_host() -> Placement:
    """A single task on this machine, unrestricted but for ``CUDA_VISIBLE_DEVICES``."""
    return Placement(hosts=(socket.gethostname(),), gpus=visible_gpus())
