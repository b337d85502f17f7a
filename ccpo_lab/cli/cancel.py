"""``ccpo-lab cancel SWEEP_DIR [--arm A] [--seed K]``: cancel a sweep's unfinished runs."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add the ``cancel`` command to ``app``."""
    app.command("cancel")(cancel)


def cancel(
    sweep_dir: Path = typer.Argument(..., help="The sweep's results directory."),
    arm: str = typer.Option(None, "--arm", help="Only this arm's runs."),
    seed: int = typer.Option(None, "--seed", help="Only this seed's runs."),
    grace: float = typer.Option(10.0, "--grace", min=0.0, help="Seconds a run has to stop "
                                "after SIGINT before it is killed (SIGKILL)."),
) -> None:
    """Cancel queued and running runs and evaluation jobs (Slurm jobs, local processes); a
    relaunch resumes them.

    A run executing on this host is sent SIGINT, then SIGKILL after --grace seconds, and
    cancel returns once it stopped; exit 1 when a run could not be stopped.
    """
    from ccpo_lab.cli.paths import environment_heading, sweep_dirs

    failed = False
    for env, d in sweep_dirs(sweep_dir):
        heading = environment_heading(env, d)
        if heading:
            typer.echo(heading)
        failed = not _cancel(d, arm, seed, grace) or failed
    if failed:
        raise typer.Exit(1)


def _cancel(sweep_dir: Path, arm: str | None, seed: int | None, grace: float) -> bool:
    """Cancel in one sweep directory; False when a run could not be stopped."""
    from ccpo_lab.evaluation.track import cancel_evaluations
    from ccpo_lab.launch.cancel import cancel_runs

    done, problems = cancel_runs(sweep_dir, arm=arm, seed=seed, grace_s=grace)
    evals, trouble = cancel_evaluations(sweep_dir, arm=arm, seed=seed, grace_s=grace)
    problems += trouble
    if not done and not evals and not problems:
        typer.echo("nothing to cancel (the selected runs are finished)")
    for c in done:
        typer.echo(f"cancelled {c.status.arm} seed {c.status.seed} ({c.status.state}): {c.how}")
    for c in evals:
        typer.echo(f"cancelled the evaluation job of {c.status.arm} seed {c.status.seed} "
                   f"({c.status.state}): {c.how}")
    for p in problems:
        typer.echo(f"error: {p}", err=True)
    return not problems
