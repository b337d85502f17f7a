"""``ccpo-lab import SWEEP_DIR --arm A --seed K PATH``: report runs made before ccpo-lab."""

from __future__ import annotations

from pathlib import Path

import typer

from ccpo_lab.textout import safe


def register(app: typer.Typer) -> None:
    """Add the ``import`` command to ``app``."""
    app.command("import")(import_cmd)


def import_cmd(
    sweep_dir: Path = typer.Argument(..., help="Sweep directory (created if missing)."),
    path: Path = typer.Argument(..., help="verl file-logger JSONL or console log, or a "
                                "finished W&B run: its offline directory "
                                "(wandb/offline-run-*) or wandb:ENTITY/PROJECT/RUN_ID."),
    arm: str = typer.Option(..., "--arm", help="Arm name to import the run as."),
    seed: int = typer.Option(..., "--seed", help="Seed to import the run as."),
    replace: bool = typer.Option(False, "--replace", help="Replace an earlier import of "
                                 "another file at this (arm, seed)."),
    total_steps: int | None = typer.Option(None, "--total-steps", help="The run's final "
                                           "step (lets the report flag interim runs)."),
    val_episodes: int | None = typer.Option(None, "--val-episodes", help="Held-out episodes "
                                            "per evaluation (for binomial errors)."),
) -> None:
    """Bring an existing run's metrics into SWEEP_DIR as (arm, seed).

    Reads verl's file-logger JSONL ({"step": N, "data": {...}} per line), its console
    log (lines 'step:N - key:value - ...' among any other output), or a finished W&B
    run's history (its verl-named metrics, W&B's step as the step: an offline run
    directory, or wandb:ENTITY/PROJECT/RUN_ID through the API). Bad or partial logs are
    refused and nothing is written; the same file twice changes nothing.
    """
    from ccpo_lab.runs.importer import import_run

    res = import_run(sweep_dir, arm, seed, path, replace=replace, total_steps=total_steps,
                     val_episodes=val_episodes)
    for w in res.warnings:
        typer.secho(f"warning: {safe(w)}", fg="yellow", err=True)
    if res.status == "unchanged":
        typer.echo(f"{arm} seed {seed}: already imported from this file ({res.run_dir}); "
                   "nothing changed")
        return
    what = "W&B run" if res.format == "wandb" else f"{res.format} log"
    typer.echo(f"{arm} seed {seed}: {res.status} {res.rows} steps ({res.first_step}.."
               f"{res.last_step}, {what}) into {res.run_dir}")
