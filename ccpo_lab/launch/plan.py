"""The plan of a sweep: which run goes where, and what would be executed. Writes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ccpo_lab.config.schema import LauncherConfig, RunConfig
from ccpo_lab.config.sweep import Sweep
from ccpo_lab.errors import RunConflictError, UserError
from ccpo_lab.runs.layout import RunDir, resolve_run_dir


@dataclass(frozen=True)
class PlannedRun:
    """One (arm, seed) run of a plan."""

    run: RunConfig
    """The resolved run."""
    run_dir: RunDir | None
    """Where it lives (None when refused)."""
    status: str
    """``new``, ``exists`` (same identity on disk: resume or skip) or ``conflict``."""
    conflict: str | None = None
    """The refusal message with its diff, when ``status`` is ``conflict``."""


def plan_sweep(sweep: Sweep, results: str | Path, *, new_run: bool = False) -> list[PlannedRun]:
    """Every run of ``sweep`` with its directory and status, after the backends' checks
    over the whole sweep (:func:`ccpo_lab.backends.check_sweep`: a verl sweep's GPU layout,
    before any job is submitted)."""
    from ccpo_lab.backends import check_sweep

    sweep_dir = sweep.sweep_dir(results)
    out = []
    for run in sweep.runs:
        try:
            rd = resolve_run_dir(sweep_dir, run, new_run=new_run)
        except RunConflictError as e:
            out.append(PlannedRun(run, None, "conflict", str(e)))
            continue
        out.append(PlannedRun(run, rd, "exists" if rd.exists() else "new"))
    try:
        check_sweep([p.run for p in out], [p.run_dir for p in out])
    except UserError as e:
        e.file = e.file or sweep.source
        raise
    return out


def resources(launcher: LauncherConfig) -> str:
    """One-line description of what each run asks for."""
    if launcher.kind == "inline":
        return "this process"
    if launcher.kind == "local":
        slot = f"{launcher.gpus_per_run} GPU" if launcher.gpus_per_run else "1 CPU slot"
        return f"{slot}, {launcher.max_parallel} at once"
    parts = [f"partition={launcher.partition or '(default)'}", f"nodes={launcher.nodes}",
             f"gpus/node={launcher.gpus_per_node}", f"cpus={launcher.cpus_per_task}",
             f"time={launcher.time_min}m"]
    if launcher.mem_gb:
        parts.append(f"mem={launcher.mem_gb}G")
    return " ".join(parts)
