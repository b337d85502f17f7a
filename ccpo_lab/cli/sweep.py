"""``ccpo-lab sweep SWEEP.yaml [OVERRIDES...]``: plan (``--dry-run``) or launch a sweep."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ccpo_lab.errors import UserError

if TYPE_CHECKING:
    from ccpo_lab.config.sweep import Sweep
    from ccpo_lab.launch.plan import PlannedRun
    from ccpo_lab.launch.submit import Decision

RESULTS_HELP = "Results root; the sweep's directory is <results>/<sweep name>/."
MULTIRUN = ("ccpo-lab has no multirun: it expands arms x seeds itself; give lists "
            "(arms=[grpo,gigpo] seeds=[0,1,2], or seeds=range(0,5)) and one value for every "
            "other key")
"""Hydra's ``--multirun`` / ``-m``: what to write instead."""


def register(app: typer.Typer) -> None:
    """Add the ``sweep`` command to ``app``."""
    app.command("sweep", context_settings={"allow_extra_args": False})(sweep)


def sweep(
    sweep_file: Path = typer.Argument(..., help="Sweep file (sweeps/*.yaml)."),
    overrides: list[str] = typer.Argument(None, help="Hydra overrides, e.g. seeds=[0,1,2] "
                                          "launcher=slurm launcher.partition=gpu."),
    results: Path = typer.Option(Path("results"), "--results", help=RESULTS_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; write nothing."),
    new_run: bool = typer.Option(False, "--new-run", help="Put runs whose directory holds "
                                 "another identity beside it instead of refusing."),
    wait: bool = typer.Option(False, "--wait", help="Wait for every run to finish; exit 1 "
                              "unless all completed."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Resubmit failed runs."),
    commands: bool = typer.Option(False, "--commands", help="With --dry-run: print every "
                                  "run's command (default: the first run's)."),
    multirun: bool = typer.Option(False, "--multirun", "-m", hidden=True,
                                  help="Refused: give lists (seeds=[0,1,2])."),
) -> None:
    """Launch every (arm, seed) run of a sweep, or print the plan with --dry-run.

    Submits and returns (follow with `ccpo-lab status <results>/<sweep>`) unless --wait;
    the inline launcher always runs here. A relaunch skips completed runs, resumes partial
    ones from their checkpoints and resubmits failed ones only with --retry-failed.

    With an adaptive design (analysis.adaptive.max_seeds), each call also takes the next
    look's decision when its runs are complete and launches the seeds it adds; run it
    again later (or with --wait, to the end of the design).

    With tracking.live: true, --wait keeps the MLflow store current while it waits (a
    `ccpo-lab sync --watch` beside it, every tracking.live_every seconds).
    """
    from ccpo_lab.cli.paths import output_dir
    from ccpo_lab.cli.paths import sweep_file as find_sweep_file
    from ccpo_lab.config.sweep import load_sweep

    if multirun:
        raise UserError(MULTIRUN, file="command line", key="--multirun")
    output_dir(results, "--results")
    sw = load_sweep(find_sweep_file(sweep_file), overrides or [])
    parts = _environments(sw, results)
    for w in _unseen_warnings(parts[0], results, dry_run):
        typer.secho(f"warning: {w}", fg="yellow", err=True)
    if sw.multi_environment:
        _prepare_family(sw, parts, results, dry_run)
    code = 0
    for part in parts:
        if part.family:
            typer.echo(f"== environment {part.environment} ({part.sweep_dir(results)})")
        if dry_run:
            _dry_run(part, results, new_run=new_run, retry_failed=retry_failed,
                     commands=commands)
            continue
        code = max(code, _launch(part, results, new_run=new_run, wait=wait,
                                 retry_failed=retry_failed))
    if code:
        raise typer.Exit(code)


def _prepare_family(sw: Sweep, parts: list[Sweep], results: Path, dry_run: bool) -> None:
    """A sweep over several environments: the whole study's budget, every environment's
    modules, before any is launched; then its folder is marked (not on a dry run)."""
    from ccpo_lab.launch.costplan import check_budget, family_estimate
    from ccpo_lab.launch.submit import check_job_modules
    from ccpo_lab.runs.family import write_family

    check_budget(parts[0], results, family_estimate(parts, results))
    if not dry_run:
        for part in parts:
            check_job_modules(part)
        write_family(sw.family_dir(results), sw.name, sw.environments)


def _environments(sw: Sweep, results: Path) -> list[Sweep]:
    """The sweep per environment (itself when it runs on one), after checking that its
    folder under ``results`` holds this kind of sweep (:mod:`ccpo_lab.runs.family`)."""
    from ccpo_lab.runs.family import check_family, check_not_family

    folder = sw.family_dir(results)
    if sw.multi_environment:
        check_family(folder, sw.environments)
    else:
        check_not_family(folder)
    return sw.per_environment()


def _dry_run(sw: Sweep, results: Path, *, new_run: bool, retry_failed: bool,
             commands: bool) -> None:
    """``--dry-run`` of one sweep (one environment's): the plan, nothing written."""
    only = None
    if sw.design is not None:
        from ccpo_lab.adaptive.launch import dry_run as adaptive_dry_run

        sw, only, line = adaptive_dry_run(sw, results)
        typer.echo(line)
    print_plan(sw, results, new_run=new_run, retry_failed=retry_failed,
               commands=commands, only=only)


def _launch(sw: Sweep, results: Path, *, new_run: bool, wait: bool, retry_failed: bool
            ) -> int:
    """Launch the sweep (its adaptive design's next look, when it has one), the live sync
    beside a ``--wait``; the exit code."""
    from ccpo_lab.tracking.live import live_sync

    with live_sync(sw, results) if wait else contextlib.nullcontext():
        if sw.design is not None:
            from ccpo_lab.adaptive.launch import launch_adaptive

            return launch_adaptive(sw, results, new_run=new_run, wait=wait,
                                   retry_failed=retry_failed)
        from ccpo_lab.launch.costplan import check_budget
        from ccpo_lab.launch.submit import launch_sweep

        check_budget(sw, results)
        return launch_sweep(sw, results, new_run=new_run, wait=wait,
                            retry_failed=retry_failed)


def _plan_table(plan: list[PlannedRun], decisions: dict[int, Decision]) -> Any:
    """The plan's table: arm (whole), seed, run id, what happens to the run."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("arm", overflow="fold")
    table.add_column("seed", justify="right", no_wrap=True)
    table.add_column("run id", no_wrap=True)
    table.add_column("plan", overflow="fold")
    for p in plan:
        d = decisions.get(id(p))
        if d is None:
            what = "refused: the directory holds another run (see below)"
        elif d.action == "new":
            what = "new" if p.status == "new" else f"replace: the run there {p.replaces}"
        else:
            what = f"{d.action}: {d.reason}"
        table.add_row(p.run.arm, str(p.run.seed), p.run.short_id, what)
    return table


def _unseen_warnings(sw: Sweep, results: Path, dry_run: bool) -> list[str]:
    """The sweep's lint warnings: every one on a dry run, else those its results
    directory has not recorded yet (a relaunch does not repeat them)."""
    if dry_run:
        return sw.warnings
    from ccpo_lab.runs.layout import SweepDir

    seen = SweepDir(sw.sweep_dir(results)).read_manifest().get("warnings") or []
    return [w for w in sw.warnings if w not in seen]


def print_plan(sw: Sweep, results: Path, *, new_run: bool, retry_failed: bool = False,
               commands: bool = False, only: set[tuple[str, int]] | None = None) -> None:
    """Print what a launch would do, readable at 80 columns: the launcher and resources
    once, a table of the runs (arm names whole) with what happens to each (new, skip,
    resume, replace, refused), what would be submitted (a Slurm array's batch script),
    each run's directory and the command of the first run (of every run with
    ``commands``); ``only``: just these ``(arm, seed)`` runs."""
    from rich.console import Console

    from ccpo_lab.backends import describe
    from ccpo_lab.fitted import fitted
    from ccpo_lab.launch.plan import launcher_for, plan_sweep
    from ccpo_lab.launch.submit import decide, summary
    from ccpo_lab.runs.layout import RunDir

    plan = [p for p in plan_sweep(sw, results, new_run=new_run)
            if only is None or (p.run.arm, p.run.seed) in only]
    launcher = launcher_for(sw, results)
    placement = launcher.placement()
    conflicts = [p for p in plan if p.status == "conflict"]
    decisions = {id(d.planned): d for d in decide(
        [p for p in plan if p.status != "conflict"], sw.sweep_dir(results),
        retry_failed=retry_failed)}
    console = Console()
    say = lambda text: console.print(text, highlight=False, markup=False,  # noqa: E731
                                     soft_wrap=True)
    env = f" on {sw.environment}" if sw.family or sw.environment != "alfworld" else ""
    say(f"sweep {sw.name}{env}: {len(sw.arms)} arms x {len(sw.config.seeds)} seeds = {len(plan)} "
        f"runs -> {sw.sweep_dir(results)} (dry run, nothing written)")
    say(f"backend {sw.config.backend.kind}; launcher {launcher.kind}: {launcher.resources()}")
    console.print(fitted(_plan_table(plan, decisions)))
    if decisions:
        say(summary(list(decisions.values())))
    from ccpo_lab.launch.costplan import check_budget, estimate_lines, sweep_estimate

    est = sweep_estimate(sw, results)
    for line in estimate_lines(sw, est, design=sw.design is not None):
        say(line)
    submitted = [d.planned for d in decisions.values() if d.submit]
    for line in launcher.preview(len(submitted)) if submitted else []:
        say(line)
    shown = 0
    for p in plan:
        if p.run_dir is None:
            continue
        say(f"{p.run.arm} seed {p.run.seed} -> {p.run_dir.path}")
        if commands or shown == 0:
            # absolute paths: the command cds into the run's logs, and runs as printed
            say(f"  {describe(p.run, RunDir(p.run_dir.path.absolute()), placement)}")
            shown += 1
    if not commands and len(plan) > 1:
        say("(the command of the first run; --commands prints every run's)")
    if conflicts:
        raise UserError(f"{len(conflicts)} run(s) would be refused; first: {conflicts[0].conflict}")
    check_budget(sw, results, est)
