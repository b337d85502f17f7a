"""The ``slurm`` launcher's settings, and the checks of them that need no cluster.

Everything is checked before anything is submitted. A bad key is a :class:`UserError`
listing the valid ones; a string with a control character (a newline could end an
``#SBATCH`` line and start a shell command) is refused. ``sbatch_extra`` is validated against
submitit's own list of parameters (imported when the sweep sets some). Turning the settings
into submitit's parameters is :mod:`ccpo_lab.launch.params`'s job.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ccpo_lab.config.launcher import LauncherSettings, Where
from ccpo_lab.config.validate import check_range
from ccpo_lab.errors import UserError

OWNED = {
    "job_name": "the sweep name",
    "partition": "launcher.partition",
    "account": "launcher.account",
    "qos": "launcher.qos",
    "time": "launcher.time_min",
    "nodes": "the backend (a run's nodes: backend.verl.nnodes)",
    "gpus_per_node": "the backend (backend.verl.n_gpus_per_node)",
    "cpus_per_task": "launcher.cpus_per_task",
    "mem": "launcher.mem_gb",
    "constraint": "launcher.constraint",
    "array_parallelism": "launcher.array_parallelism",
    "setup": "launcher.setup",
    "num_gpus": "the backend (backend.verl.n_gpus_per_node)",
}
"""submitit parameters set from first-class launcher fields (not allowed in sbatch_extra)."""

_WRITTEN_FLAGS = {"output", "error", "open-mode", "array", "signal", "job-name", "parsable",
                  "wrap"}
_FLAG_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_LINE_LISTS = ("setup", "teardown")
_SCALAR = (str, int, float, bool)


def submitit_defaults() -> dict[str, Any]:
    """submitit's Slurm parameters with their defaults (its own list)."""
    from submitit.slurm.slurm import _get_default_parameters

    return dict(_get_default_parameters())


def sbatch_extra_keys() -> list[str]:
    """Keys valid in ``launcher.sbatch_extra``: submitit's parameters not set elsewhere."""
    return sorted(k for k in submitit_defaults() if k not in OWNED)


def check_text(value: Any, key: str) -> None:
    """Refuse a string with a control character (newline, NUL, escape...)."""
    if isinstance(value, str) and _CONTROL_RE.search(value):
        raise UserError("control characters are not allowed (a newline would end the "
                        "#SBATCH line)", key=key, value=value)


def _check_lines(lines: Any, key: str) -> list[str]:
    if not isinstance(lines, list | tuple) or not all(isinstance(x, str) for x in lines):
        raise UserError("expected a list of shell lines (strings)", key=key, value=lines)
    for i, line in enumerate(lines):
        check_text(line, f"{key}[{i}]")
    return list(lines)


def _check_additional(extra: Any, key: str) -> dict[str, Any]:
    if not isinstance(extra, Mapping):
        raise UserError("expected a mapping of sbatch long options to values", key=key,
                        value=extra)
    out: dict[str, Any] = {}
    for flag, value in extra.items():
        fkey = f"{key}.{flag}"
        if not isinstance(flag, str) or not _FLAG_RE.match(flag):
            raise UserError("not an sbatch long option name", key=fkey, value=flag,
                            valid="lower-case letters, digits, '-' and '_'")
        norm = flag.replace("_", "-")
        if norm in _WRITTEN_FLAGS:
            raise UserError("set by ccpo-lab itself; cannot be overridden", key=fkey,
                            valid=sorted(_WRITTEN_FLAGS))
        if norm.replace("-", "_") in OWNED:
            raise UserError(f"set it through {OWNED[norm.replace('-', '_')]}", key=fkey)
        if not isinstance(value, _SCALAR):
            raise UserError("expected a string, number or true", key=fkey, value=value)
        check_text(value, fkey)
        out[flag] = value
    return out


def check_extra(extra: Mapping[str, Any]) -> dict[str, Any]:
    """``launcher.sbatch_extra`` checked against submitit's parameters (which are imported
    only when there is something to check)."""
    if not extra:
        return {}
    defaults = submitit_defaults()
    valid = sbatch_extra_keys()
    out: dict[str, Any] = {}
    for k, v in extra.items():
        key = f"launcher.sbatch_extra.{k}"
        if k in OWNED:
            raise UserError(f"set it through {OWNED[k]}", key=key)
        if k not in defaults:
            raise UserError("unknown sbatch parameter", key=key, valid=valid)
        if k in _LINE_LISTS:
            v = _check_lines(v, key)
        elif k == "additional_parameters":
            v = _check_additional(v, key)
        elif k == "srun_args":
            v = _check_lines(v, key)
        elif isinstance(v, list | tuple | Mapping) or not isinstance(v, _SCALAR):
            raise UserError("expected a string, number or boolean", key=key, value=v)
        check_text(v, key)
        out[k] = v
    return out


def check_settings(settings: SlurmSettings) -> None:
    """The checks that need no run and no cluster: text fields, ``setup`` and
    ``sbatch_extra`` (validated against submitit's own list of parameters)."""
    for key in ("partition", "account", "qos", "constraint"):
        check_text(getattr(settings, key), f"launcher.{key}")
    if settings.setup:
        _check_lines(settings.setup, "launcher.setup")
    check_extra(settings.sbatch_extra)


_RESOURCES_FROM_BACKEND = "a run's nodes and GPUs come from its backend ({}), stated once"


@dataclass(frozen=True)
class SlurmSettings(LauncherSettings):
    """``launcher.kind: slurm``: one job array per sweep. Nodes and GPUs per node are
    what the run's backend needs (``backend.verl.nnodes``, ``n_gpus_per_node``)."""

    kind: str = field(default="slurm", init=False)
    partition: str | None = None
    """Partition (``--partition``); default: the cluster's."""
    account: str | None = None
    """Account (``--account``)."""
    qos: str | None = None
    """Quality of service (``--qos``)."""
    time_min: int = 60
    """Time limit per job in minutes; requeued on timeout."""
    cpus_per_task: int | None = None
    """CPUs per task (one task per node); default: what the backend needs, at least 1."""
    mem_gb: int | None = None
    """Memory per node in GB."""
    constraint: str | None = None
    """Node feature constraint."""
    array_parallelism: int = 16
    """Array tasks running at once."""
    max_num_timeout: int = 3
    """Requeues after timeout or preemption before giving up."""
    sbatch_extra: dict[str, Any] = field(default_factory=dict)
    """Further sbatch parameters (validated against submitit's list)."""
    setup: list[str] = field(default_factory=list)
    """Shell lines run before the job (module loads, conda activate)."""

    moved: ClassVar[Mapping[str, str]] = {
        "nodes": _RESOURCES_FROM_BACKEND.format("backend.verl.nnodes"),
        "gpus_per_node": _RESOURCES_FROM_BACKEND.format("backend.verl.n_gpus_per_node"),
    }

    def validate(self, where: Where) -> None:
        """Ranges, then the text and ``sbatch_extra`` checks (no cluster is asked)."""
        for key in ("time_min", "array_parallelism"):
            check_range(getattr(self, key), low=1, key=f"launcher.{key}",
                        file=where(f"launcher.{key}"))
        check_range(self.max_num_timeout, low=0, key="launcher.max_num_timeout",
                    file=where("launcher.max_num_timeout"))
        for key in ("cpus_per_task", "mem_gb"):
            if getattr(self, key) is not None:
                check_range(getattr(self, key), low=1, key=f"launcher.{key}",
                            file=where(f"launcher.{key}"))
        try:
            check_settings(self)
        except UserError as e:
            e.file = e.file or where(e.key or "launcher")
            raise
