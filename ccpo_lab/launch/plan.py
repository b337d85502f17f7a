"""The plan of a sweep: which run goes where, what it needs, who launches it. Writes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ccpo_lab.config.backends import check_sweep, needs
from ccpo_lab.config.schema import RunConfig
from ccpo_lab.config.sweep import Sweep
from ccpo_lab.errors import RunConflictError, UserError
from ccpo_lab.launch.base import Launcher
from ccpo_lab.launch.registry import make_launcher
from ccpo_lab.placement import Needs
from ccpo_lab.runs.layout import RunDir, resolve_run_dir
from ccpo_lab.runs.owner import current_owner


@dataclass(frozen=True)
class PlannedRun:
    """One (arm, seed) run of a plan."""

    run: RunConfig
    """The resolved run."""
    run_dir: RunDir | None
    """Where it lives (None when refused)."""
    status: str
    """``new``, ``exists`` (same identity on disk: resume or skip), ``replace`` (the
    directory holds another run that failed before its first step: set aside, this run
    takes its place) or ``conflict``."""
    conflict: str | None = None
    """The refusal message with its diff, when ``status`` is ``conflict`` or
    ``replace``."""
    replaces: str | None = None
    """With ``replace``: what the run in the directory was (``failed before its first
    step: ...``)."""


def never_trained(rd: RunDir) -> str | None:
    """Why the run in ``rd`` may be replaced by another configuration without
    ``--new-run`` (it failed before its first training step: no step, no checkpoint, no
    process executing it), or None when it may not."""
    from ccpo_lab.runs.metrics import MetricsFormatError, read_metrics

    st = rd.read_state()
    if st.get("state") != "failed" or int(st.get("step") or 0) > 0 or \
            current_owner(rd) is not None:
        return None
    try:
        if any(int(r["step"]) > 0 for r in read_metrics(rd.metrics)):
            return None
    except (MetricsFormatError, OSError, UnicodeDecodeError, ValueError):
        return None
    if rd.checkpoints.is_dir() and any(c.name != "best" for c in rd.checkpoints.iterdir()):
        return None  # (best/ alone: the step-0 evaluation's checkpoint, no training step)
    error = str(st.get("error") or "").splitlines()[0:1]
    return "failed before its first step" + (f": {error[0]}" if error else "")


def sweep_needs(sweep: Sweep) -> Needs:
    """What each run of ``sweep`` needs (its backend says; one value per sweep, since a
    sweep's runs share one job array and one GPU layout)."""
    found = {needs(run): f"{run.arm} seed {run.seed}" for run in sweep.runs}
    if len(found) > 1:
        (a, who_a), (b, who_b) = list(found.items())[:2]
        raise UserError(f"the runs of a sweep must need the same resources: {who_a} needs "
                        f"{a.describe()}, {who_b} {b.describe()}", file=sweep.source)
    return next(iter(found))


def launcher_for(sweep: Sweep, results: str | Path) -> Launcher:
    """The sweep's launcher object, for its results directory and its runs' needs."""
    return make_launcher(sweep.config.launcher, sweep.sweep_dir(results), name=sweep.name,
                         needs=sweep_needs(sweep))


def plan_sweep(sweep: Sweep, results: str | Path, *, new_run: bool = False) -> list[PlannedRun]:
    """Every run of ``sweep`` with its directory and status, after the backends' checks
    over the whole sweep (:func:`ccpo_lab.config.backends.check_sweep`: a verl sweep's GPU layout,
    before any job is submitted) and the launcher's (:meth:`Launcher.check
    <ccpo_lab.launch.base.Launcher.check>`: can it give each run what it needs?)."""
    sweep_dir = sweep.sweep_dir(results)
    out = []
    for run in sweep.runs:
        try:
            rd = resolve_run_dir(sweep_dir, run, new_run=new_run)
        except RunConflictError as e:
            held = RunDir(Path(e.file)) if e.file else None
            why = never_trained(held) if held is not None else None
            if held is not None and why is not None:
                out.append(PlannedRun(run, held, "replace", str(e), why))
            else:
                out.append(PlannedRun(run, None, "conflict", str(e)))
            continue
        out.append(PlannedRun(run, rd, "exists" if rd.exists() else "new"))
    try:
        check_sweep([p.run for p in out], [p.run_dir for p in out])
        launcher_for(sweep, results).check()
    except UserError as e:
        e.file = e.file or sweep.source
        raise
    return out
