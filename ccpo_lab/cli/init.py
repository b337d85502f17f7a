"""``ccpo-lab init DIR``: scaffold a project (arms that extend the shipped ones, a sweep
for the CPU backend under any launcher, one for the verl backend, a README)."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add the ``init`` command to ``app``."""
    app.command("init")(init)


def init(directory: Path = typer.Argument(..., help="A new or empty folder.")) -> None:
    """Scaffold a project in DIR: arms/my-ccpo.yaml (extends a shipped arm),
    sweeps/study.yaml (CPU backend; inline, local or Slurm launcher),
    sweeps/verl-study.yaml (verl backend, paths to fill in) and a README of next steps."""
    from ccpo_lab.config.scaffold import scaffold

    written = scaffold(directory)
    for path in written:
        typer.echo(f"wrote {path}")
    typer.echo(f"next: cd {directory} && ccpo-lab sweep sweeps/study.yaml --dry-run "
               "(then README.md)")
