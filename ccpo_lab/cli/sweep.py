"""``ccpo-lab sweep SWEEP.yaml [OVERRIDES...]``: plan (``--dry-run``) or launch a sweep."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from ccpo_lab.config.sweep import Sweep

RESULTS_HELP = "Results root; the sweep's directory is <results>/<sweep name>/."


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
) -> None:
    """Launch every (arm, seed) run of a sweep, or print the plan with --dry-run.

    Submits and returns (follow with `ccpo-lab status <results>/<sweep>`) unless --wait;
    the inline launcher always runs here. A relaunch skips completed runs, resumes partial
    ones from their checkpoints and resubmits failed ones only with --retry-failed.

    With an adaptive design (analysis.adaptive.max_seeds), each call also takes the next
    look's decision when its runs are complete and launches the seeds it adds; run it
    again later (or with --wait, to the end of the design).
    """
    from ccpo_lab.config.sweep import load_sweep

    sw = load_sweep(sweep_file, overrides or [])
    for w in sw.warnings:
        typer.secho(f"warning: {w}", fg="yellow", err=True)
    adaptive = sw.design is not None
    if dry_run:
        only = None
        if adaptive:
            from ccpo_lab.launch.adaptive import dry_run as adaptive_dry_run

            sw, only, line = adaptive_dry_run(sw, results)
            typer.echo(line)
        print_plan(sw, results, new_run=new_run, only=only)
        return
    if adaptive:
        from ccpo_lab.launch.adaptive import launch_adaptive

        code = launch_adaptive(sw, results, new_run=new_run, wait=wait,
                               retry_failed=retry_failed)
    else:
        from ccpo_lab.launch.submit import launch_sweep

        code = launch_sweep(sw, results, new_run=new_run, wait=wait, retry_failed=retry_failed)
    if code:
        raise typer.Exit(code)


def print_plan(sw: Sweep, results: Path, *, new_run: bool,
               only: set[tuple[str, int]] | None = None) -> None:
    """Print the plan table and, per run, the command that would execute it where its
    launcher will place it (``only``: just these ``(arm, seed)`` runs)."""
    from rich.console import Console
    from rich.table import Table

    from ccpo_lab.backends import describe
    from ccpo_lab.errors import UserError
    from ccpo_lab.launch.plan import launcher_for, plan_sweep

    plan = [p for p in plan_sweep(sw, results, new_run=new_run)
            if only is None or (p.run.arm, p.run.seed) in only]
    launcher = launcher_for(sw, results)
    res, placement = launcher.resources(), launcher.placement()
    console = Console()
    table = Table(title=f"sweep {sw.name}: {len(sw.arms)} arms x {len(sw.config.seeds)} seeds "
                  f"= {len(plan)} runs (dry run, nothing written)")
    for col in ("run id", "arm", "seed", "backend", "launcher", "resources", "status"):
        table.add_column(col)
    for p in plan:
        table.add_row(p.run.short_id, p.run.arm, str(p.run.seed), p.run.backend.kind,
                      launcher.kind, res, p.status)
    console.print(table)
    for p in plan:
        if p.run_dir is not None:
            console.print(f"[bold]{p.run.arm} seed {p.run.seed}[/bold] -> {p.run_dir.path}",
                          highlight=False)
            console.print(f"  {describe(p.run, p.run_dir, placement)}", highlight=False,
                          soft_wrap=True)
    conflicts = [p for p in plan if p.status == "conflict"]
    if conflicts:
        raise UserError(f"{len(conflicts)} run(s) would be refused; first: {conflicts[0].conflict}")
