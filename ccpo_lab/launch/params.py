"""Slurm submission parameters: from :class:`~ccpo_lab.launch.slurm.SlurmSettings` and a
run's :class:`~ccpo_lab.placement.Needs` to submitit's, validated.

Everything is checked before anything is submitted. A bad key is a :class:`UserError`
listing the valid ones; a string with a control character (a newline could end an
``#SBATCH`` line and start a shell command) is refused; every value that reaches the batch
script goes through submitit's ``shlex.quote``. ``setup`` / ``teardown`` lines are shell
commands by definition (module loads, ``conda activate``) and are written as given, one
line each.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccpo_lab.errors import UserError
from ccpo_lab.placement import Needs

if TYPE_CHECKING:
    from ccpo_lab.launch.slurm import SlurmSettings

MAX_ARRAY_ENV = "CCPO_LAB_MAX_ARRAY_SIZE"
"""Environment variable capping the size of one job array below the cluster's."""

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


def _check_extra(extra: Mapping[str, Any]) -> dict[str, Any]:
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


def signal_delay_s(time_min: int) -> int:
    """Seconds before the time limit at which Slurm sends the requeue signal."""
    return max(10, min(90, time_min * 60 // 4))


def check_settings(settings: SlurmSettings) -> None:
    """The checks that need no run and no cluster: text fields, ``setup`` and
    ``sbatch_extra`` (validated against submitit's own list of parameters)."""
    for key in ("partition", "account", "qos", "constraint"):
        check_text(getattr(settings, key), f"launcher.{key}")
    if settings.setup:
        _check_lines(settings.setup, "launcher.setup")
    _check_extra(settings.sbatch_extra)


def slurm_parameters(settings: SlurmSettings, job_name: str,
                     needs: Needs = Needs()) -> dict[str, Any]:
    """submitit ``SlurmExecutor`` parameters for ``settings`` and a run that ``needs``
    nodes, GPUs per node and CPUs (what its backend states), validated (no cluster needed).

    Raises :class:`UserError` naming the key and listing the valid ones.
    """
    from submitit.slurm.slurm import _make_sbatch_string

    check_settings(settings)
    check_text(job_name, "name")
    params: dict[str, Any] = {
        "job_name": job_name,
        "time": settings.time_min,
        "nodes": needs.nodes,
        "cpus_per_task": settings.cpus_per_task or max(needs.cpus or 1, 1),
        "array_parallelism": settings.array_parallelism,
        "signal_delay_s": signal_delay_s(settings.time_min),
    }
    for key in ("partition", "account", "qos", "constraint"):
        if getattr(settings, key):
            params[key] = getattr(settings, key)
    if needs.gpus_per_node:
        params["gpus_per_node"] = needs.gpus_per_node
    if settings.mem_gb:
        params["mem"] = f"{settings.mem_gb}GB"
    if settings.setup:
        params["setup"] = list(settings.setup)
    params.update(_check_extra(settings.sbatch_extra))
    try:
        _make_sbatch_string(command="true", folder="/nonexistent/%j", **params)
    except (TypeError, ValueError) as e:
        raise UserError(f"invalid sbatch parameters: {e}", key="launcher.sbatch_extra",
                        valid=sbatch_extra_keys()) from None
    return params


def sbatch_text(params: Mapping[str, Any], folder: str | Path, command: str,
                map_count: int | None = None) -> str:
    """The batch script submitit writes for ``params`` (for inspection and tests)."""
    from submitit.slurm.slurm import _make_sbatch_string

    return str(_make_sbatch_string(command=command, folder=str(folder), map_count=map_count,
                                   **params))


def _run(cmd: list[str], timeout: float = 10) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def require_slurm() -> None:
    """Raise :class:`UserError` unless ``sbatch``, ``sinfo`` and ``sacct`` are on PATH."""
    missing = [c for c in ("sbatch", "sinfo", "sacct", "scancel") if shutil.which(c) is None]
    if missing:
        raise UserError(f"Slurm commands not found on PATH: {', '.join(missing)} (is this a "
                        "Slurm login node? `make slurm-up` starts a local cluster)",
                        key="launcher.kind", value="slurm", valid=["inline", "local"])


def cluster_partitions() -> list[str]:
    """Partition names the cluster reports (``sinfo``), default first; [] if unknown."""
    try:
        r = _run(["sinfo", "-h", "-o", "%P"])
    except (OSError, subprocess.TimeoutExpired):
        return []
    names = [p.strip() for p in r.stdout.split() if p.strip()] if r.returncode == 0 else []
    default = [p[:-1] for p in names if p.endswith("*")]
    return default + [p for p in names if not p.endswith("*")]


def check_cluster(settings: SlurmSettings) -> None:
    """Checks against the live cluster: Slurm reachable, the partition exists."""
    require_slurm()
    parts = cluster_partitions()
    if not parts:
        raise UserError("the Slurm controller does not answer (`sinfo` failed); is the "
                        "cluster up? (`make slurm-up` for the local one)")
    if settings.partition and settings.partition not in parts:
        raise UserError("unknown partition", key="launcher.partition",
                        value=settings.partition, valid=parts)


def max_array_size() -> int:
    """Largest job array the cluster accepts (``MaxArraySize``), capped by
    ``$CCPO_LAB_MAX_ARRAY_SIZE``; 1001 (Slurm's default) when unknown."""
    size = 1001
    try:
        r = _run(["scontrol", "show", "config"])
        m = re.search(r"^MaxArraySize\s*=\s*(\d+)", r.stdout, re.M)
        if m:
            size = int(m.group(1))
    except (OSError, subprocess.TimeoutExpired):
        pass
    cap = os.environ.get(MAX_ARRAY_ENV, "").strip()
    if cap:
        if not cap.isdigit() or int(cap) < 1:
            raise UserError("must be a positive integer", key=MAX_ARRAY_ENV, value=cap)
        size = min(size, int(cap))
    return max(1, size)


def chunks(items: list[Any], size: int) -> list[list[Any]]:
    """``items`` split into consecutive lists of at most ``size``."""
    return [items[i:i + size] for i in range(0, len(items), size)]
