"""``ccpo-lab doctor [SWEEP.yaml]``: check a machine before a verl sweep, one line per check."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add the ``doctor`` command to ``app``."""
    app.command("doctor")(doctor)


def doctor(
    sweep_file: Path = typer.Argument(None, help="Sweep file (its verl settings, launcher and "
                                      "tracking are checked); default: the verl defaults."),
    overrides: list[str] = typer.Argument(None, help="Hydra overrides of the sweep."),
    results: Path = typer.Option(Path("results"), "--results", help="Results root."),
) -> None:
    """Check the verl-agent checkout, packages, GPUs, ALFWorld data, model, MLflow, the
    sweep's launcher (Slurm, GPU slots) and disk; exit 1 when something needs fixing."""
    from ccpo_lab.doctor import run_doctor
    from ccpo_lab.errors import UserError

    sweep = None
    if sweep_file is not None:
        from ccpo_lab.config.sweep import load_sweep

        sweep = load_sweep(sweep_file, overrides or [])
        if sweep.config.backend.kind != "verl":
            raise UserError("doctor checks machines for the verl backend; this sweep uses "
                            f"backend {sweep.config.backend.kind!r}", file=sweep_file,
                            key="backend.kind", value=sweep.config.backend.kind)
    checks = run_doctor(sweep, results)
    for c in checks:
        typer.echo(c.line())
    bad = [c for c in checks if c.status == "FIX"]
    typer.echo(f"{len(bad)} to fix" if bad else "ready")
    if bad:
        raise typer.Exit(1)
