"""Slurm submission parameters: from :class:`~ccpo_lab.config.launchers.slurm.SlurmSettings`
and a run's :class:`~ccpo_lab.placement.Needs` to submitit's, validated.

Everything is checked before anything is submitted: the settings by
:func:`~ccpo_lab.config.launchers.slurm.check_settings` (when the sweep is loaded), the
parameters here; every value that reaches the batch script goes through submitit's
``shlex.quote``. ``setup`` / ``teardown`` lines are shell
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
from typing import Any

from ccpo_lab.config.launchers.slurm import (
    SlurmSettings,
    check_extra,
    check_settings,
    check_text,
    sbatch_extra_keys,
)
from ccpo_lab.errors import UserError
from ccpo_lab.placement import Needs

MAX_ARRAY_ENV = "CCPO_LAB_MAX_ARRAY_SIZE"
"""Environment variable capping the size of one job array below the cluster's."""


def signal_delay_s(time_min: int) -> int:
    """Seconds before the time limit at which Slurm sends the requeue signal."""
    return max(10, min(90, time_min * 60 // 4))


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
    params.update(check_extra(settings.sbatch_extra))
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
