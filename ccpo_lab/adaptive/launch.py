"""Running an adaptive seed design: decide the next look from the files, launch its seeds.

``ccpo-lab sweep SWEEP.yaml`` of a sweep with ``analysis.adaptive.max_seeds`` calls
:func:`launch_adaptive`. Each call, holding the design's lock
(:class:`~ccpo_lab.adaptive.store.DesignLock`):

1. reads ``<sweep>/adaptive.json`` (or starts the design: the listed seeds are look 1's)
   and refuses when the sweep file now describes another design;
2. while every assigned seed of the design's arms has a completed run, decides the next
   look from the runs' scores (:func:`~ccpo_lab.adaptive.decide.decide_look`) and writes
   the state atomically -- before anything of that look is launched;
3. launches the assigned runs that are not completed through the sweep's own launcher
   (:func:`~ccpo_lab.launch.submit.launch_sweep` with ``only``: completed runs are skipped,
   queued or running ones left alone, failed ones resubmitted only with
   ``--retry-failed``).

Without ``--wait`` it returns once the runs are submitted (fire and forget: run the same
command again later, e.g. from a cron job or after the jobs end); with ``--wait`` it
waits for the runs and goes on to the end of the design. When the runs executed here
(the ``inline`` launcher) it goes on as well. Nothing is decided twice (a look, once
written, is never decided again) and nothing is lost when the command dies: the lock
goes with the process, the state file is whole, and the next command launches the seeds
of a look that was decided but not launched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.adaptive.decide import pending_seeds
from ccpo_lab.adaptive.state import AdaptiveState, Look
from ccpo_lab.adaptive.store import DesignLock, DesignRecord, read_record, run_score, write_record
from ccpo_lab.config.design import AdaptiveDesign
from ccpo_lab.config.identity import diff, format_diff
from ccpo_lab.config.sweep import Sweep
from ccpo_lab.errors import UserError
from ccpo_lab.launch.display import make_console, watch
from ccpo_lab.launch.plan import launcher_for, plan_sweep
from ccpo_lab.launch.registry import launcher_class
from ccpo_lab.launch.status import RunStatus, collect_status
from ccpo_lab.launch.submit import launch_sweep
from ccpo_lab.runs.layout import RunDir, SweepDir

__all__ = ["assigned_runs", "design_summary", "dry_run", "launch_adaptive", "start_record"]


def start_record(sw: Sweep, design: AdaptiveDesign, sweep: SweepDir) -> DesignRecord:
    """The sweep's design record: the one on disk, else a new one (nothing written).

    Raises:
        UserError: the sweep now asks for another design, or scores of another metric or
            window, than the one on disk (a design cannot change during a study).
    """
    an = sw.config.analysis
    fresh = DesignRecord(AdaptiveState(design), an.metric, an.window_start)
    held = read_record(sweep)
    if held is None:
        return fresh
    old = {"design": held.state.design.to_dict(),
           "scores": {"metric": held.metric, "window_start": held.window_start}}
    new = {"design": design.to_dict(),
           "scores": {"metric": an.metric, "window_start": an.window_start}}
    rows = diff(old, new)
    if rows:
        looks = len(held.state.looks)
        how = ("relaunch with the same settings, or use another sweep name" if looks else
               "relaunch with the same settings, or remove this file (no look was decided "
               "yet) to start the new design")
        raise UserError(
            f"the sweep describes another adaptive design than the one under way ({looks} "
            f"looks decided); a design cannot change during a study: {how}",
            file=sweep.adaptive_state, detail=format_diff(rows, "under way", "requested"))
    return held


def assigned_runs(sw: Sweep, record: DesignRecord | None) -> tuple[Sweep, set[tuple[str, int]]]:
    """The sweep with every seed assigned so far, and its ``(arm, seed)`` runs: the
    listed seeds for every arm, plus the seeds the looks added to the design's arms."""
    listed = list(sw.config.seeds)
    added = record.state.assigned_seeds() if record is not None else {}
    pairs = {(arm, s) for arm in sw.config.arms for s in added.get(arm, listed)}
    pairs |= {(arm, s) for arm in sw.config.arms for s in listed}
    seeds = sorted({s for _, s in pairs}, key=lambda s: (s not in listed, s))
    return sw.with_seeds(seeds), pairs


@dataclass(frozen=True)
class _Runs:
    """The assigned runs now: their status, and the design arms' scores."""

    rows: dict[tuple[str, int], RunStatus]
    """Status of each assigned run with a directory."""
    missing: tuple[tuple[str, int], ...]
    """Assigned runs without a directory yet (never launched)."""
    scores: dict[str, dict[int, float]]
    """arm -> seed -> score of the completed runs of the design's arms."""

    def not_done(self) -> list[tuple[str, int]]:
        """Assigned runs that are not completed."""
        return sorted([*self.missing, *(k for k, r in self.rows.items()
                                        if r.state != "completed")])


def _read_runs(sw: Sweep, results: Path, record: DesignRecord, new_run: bool) -> _Runs:
    expanded, pairs = assigned_runs(sw, record)
    plan = [p for p in plan_sweep(expanded, results, new_run=new_run)
            if (p.run.arm, p.run.seed) in pairs]
    have = {(p.run.arm, p.run.seed): p.run_dir for p in plan
            if p.status == "exists" and p.run_dir is not None}
    dirs: list[RunDir] = list(have.values())
    status = collect_status(sw.sweep_dir(results), dirs) if dirs else []
    rows = {key: r for key, r in zip(have, status, strict=True)}
    arms = set(record.state.design.arms)
    scores: dict[str, dict[int, float]] = {}
    for (arm, seed), r in rows.items():
        if arm in arms and r.state == "completed":
            scores.setdefault(arm, {})[seed] = run_score(have[(arm, seed)], record.metric,
                                                         record.window_start)
    missing = tuple(sorted(pairs - set(rows)))
    return _Runs(rows, missing, scores)


def _look_lines(look: Look, design: AdaptiveDesign) -> list[str]:
    seeds = ", ".join(f"{a} {len(s)}" for a, s in look.seeds.items())
    lines = [f"adaptive look {look.index} (seeds per arm: {seeds}):"]
    for d in look.decisions:
        lines.append(f"  {d.arm} vs {d.baseline}: {d.action} -- {d.reason}")
    if look.add:
        adds = "; ".join(f"{a} +{list(s)}" for a, s in look.add.items())
        lines.append(f"  next: seeds {adds} (max {design.max_seeds} per arm)")
    else:
        lines.append("  the design is finished: every comparison is decided")
    return lines


def _decide_ready(record: DesignRecord, sw: Sweep, results: Path, new_run: bool,
                  console: Any) -> tuple[DesignRecord, _Runs]:
    """Decide every look the completed runs allow, writing the state after each."""
    sweep = SweepDir(sw.sweep_dir(results))
    while True:
        runs = _read_runs(sw, results, record, new_run)
        if record.state.finished or pending_seeds(record.state, runs.scores):
            return record, runs
        record = record.advance(runs.scores)
        write_record(sweep, record)  # before anything of this look is launched
        for line in _look_lines(record.state.looks[-1], record.state.design):
            console.print(line, highlight=False, markup=False)


def _blocked(runs: _Runs) -> list[str]:
    """Assigned runs that finished without completing (the look cannot be decided)."""
    return [f"{a} seed {s} {runs.rows[(a, s)].state}" for a, s in runs.not_done()
            if (a, s) in runs.rows and runs.rows[(a, s)].terminal]


def _wait(sw: Sweep, results: Path, runs: _Runs, console: Any) -> bool:
    """Wait until the assigned runs are finished; False on Ctrl-C."""
    dirs = [Path(r.path) for k, r in runs.rows.items() if not r.terminal]
    if not dirs:
        return True
    poll = max(2.0, launcher_class(sw.config.launcher.kind).poll_s)
    rows = watch(sw.sweep_dir(results), console, runs=[RunDir(p) for p in dirs],
                 interval=poll, title=f"sweep {sw.name}: adaptive look in progress")
    return all(r.terminal for r in rows)


def launch_adaptive(sw: Sweep, results: str | Path, *, new_run: bool = False,
                    wait: bool = False, retry_failed: bool = False,
                    console: Any = None) -> int:
    """Take every decision the files allow and launch the seeds; return the exit code.

    See the module docstring. Returns 0 when the design is finished and its runs are
    completed, or (without ``wait``) once the look's runs are submitted; 1 when a look
    waits on a run that failed (relaunch with ``retry_failed``); 130 when Ctrl-C stops
    the wait (the runs go on; run the command again to continue).
    """
    design = sw.design
    if design is None:
        raise ValueError("launch_adaptive needs a sweep with analysis.adaptive.max_seeds")
    console = console or make_console()
    results = Path(results)
    sweep = SweepDir(sw.sweep_dir(results))
    plan_sweep(sw, results, new_run=new_run)  # the backends' and launcher's checks: before
    launcher_for(sw, results).prepare()  # anything (the lock, the state) is written
    with DesignLock(sweep):
        record = start_record(sw, design, sweep)
        if not sweep.adaptive_state.is_file():  # the design is fixed from its first launch
            write_record(sweep, record)
        while True:
            record, runs = _decide_ready(record, sw, results, new_run, console)
            if (stop := _over_budget(sw, results, record, runs)) is not None:
                for line in stop:
                    console.print(line, highlight=False, markup=False, soft_wrap=True)
                return 0
            code = _launch(sw, results, record, runs, new_run=new_run,
                           retry_failed=retry_failed, console=console)
            runs = _read_runs(sw, results, record, new_run)
            if not runs.not_done():
                if record.state.finished:
                    _finished(record, console)
                    return 0
                continue  # the runs executed here: the next look can be decided
            blocked = _blocked(runs)
            if blocked and all((a, s) in runs.rows and runs.rows[(a, s)].terminal
                               for a, s in runs.not_done()):
                console.print(f"adaptive look {len(record.state.looks) + 1} waits on runs "
                              f"that did not complete: {', '.join(blocked)}; relaunch with "
                              "--retry-failed", highlight=False, markup=False)
                return 1
            if not wait:
                _in_progress(sw, record, runs, console)
                return code
            if not _wait(sw, results, runs, console):
                console.print("stopped waiting; the runs go on: run the same command again "
                              "to continue the design", highlight=False, markup=False)
                return 130


def _over_budget(sw: Sweep, results: Path, record: DesignRecord, runs: _Runs
                 ) -> list[str] | None:
    """Why the look's new runs (assigned, never launched) are not launched: the budget
    (:mod:`ccpo_lab.adaptive.budget`); None when they fit or no budget is set."""
    from ccpo_lab.adaptive.budget import look_over_budget

    new = [k for k in runs.not_done() if k not in runs.rows]
    expanded, assigned = assigned_runs(sw, record)
    return look_over_budget(sw, expanded, assigned, results, record, new)


def _launch(sw: Sweep, results: Path, record: DesignRecord, runs: _Runs, *, new_run: bool,
            retry_failed: bool, console: Any) -> int:
    """Submit the assigned runs that are not completed (the launcher skips live ones)."""
    todo = set(runs.not_done())
    if not todo:
        return 0
    expanded, _ = assigned_runs(sw, record)
    return launch_sweep(expanded, results, new_run=new_run, wait=False,
                        retry_failed=retry_failed, console=console, only=todo)


def _in_progress(sw: Sweep, record: DesignRecord, runs: _Runs, console: Any) -> None:
    n = len(runs.not_done())
    look = len(record.state.looks) + 1
    console.print(f"adaptive look {look}: {n} run(s) to finish first; then run the same "
                  f"command again (or add --wait) to take the decision: ccpo-lab sweep "
                  f"{sw.source}{''.join(' ' + o for o in sw.overrides)}", highlight=False,
                  markup=False)


def _finished(record: DesignRecord, console: Any) -> None:
    last = record.state.last_decisions()
    console.print(f"adaptive design finished after {len(record.state.looks)} looks:",
                  highlight=False, markup=False)
    for (arm, base), d in last.items():
        console.print(f"  {arm} vs {base}: {d.verdict_text()} (look "
                      f"{_closed_at(record, (arm, base))}, level {d.level:.3g}, nominal "
                      f"{_g(d.nominal)})", highlight=False, markup=False)


def _closed_at(record: DesignRecord, key: tuple[str, str]) -> int:
    return max(look.index for look in record.state.looks
               if any(d.key == key for d in look.decisions))


def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def design_summary(design: AdaptiveDesign, record: DesignRecord | None) -> str:
    """One line for ``--dry-run``: the design and where it stands."""
    comps = ", ".join(f"{a} vs {b}" for a, b in design.comparisons)
    where = "not started" if record is None else (
        f"{len(record.state.looks)} looks decided"
        + (", finished" if record.state.finished else ""))
    rule = (f"{design.test} test, {design.family} family"
            + (f" ({design.statistic}, {design.variance} variance)"
               if design.family == "joint" else ""))
    return (f"adaptive design: {comps}; {design.first_look_seeds} seeds first, "
            f"+{design.seeds_per_look} per look up to {design.max_seeds} per arm; "
            f"{rule}; {design.spending} spending, alpha {design.alpha:g}; {where}")


def dry_run(sw: Sweep, results: str | Path) -> tuple[Sweep, set[tuple[str, int]], str]:
    """For ``--dry-run``: the sweep with the seeds assigned so far, its runs, and the
    design's summary line (reads the state without the lock; writes nothing)."""
    design = sw.design
    if design is None:
        raise ValueError("dry_run needs a sweep with analysis.adaptive.max_seeds")
    sweep = SweepDir(sw.sweep_dir(results))
    record = start_record(sw, design, sweep) if sweep.adaptive_state.is_file() else None
    expanded, pairs = assigned_runs(sw, record)
    return expanded, pairs, design_summary(design, record)
