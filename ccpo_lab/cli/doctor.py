"""``ccpo-lab doctor [SWEEP.yaml]``: check a machine before a verl sweep, one line per check."""

from __future__ import annotations

from pathlib import Path

import typer

from ccpo_lab.errors import UserError


def register(app: typer.Typer) -> None:
    """Add the ``doctor`` command to ``app``."""
    app.command("doctor")(doctor)


def doctor(
    sweep_file: Path = typer.Argument(None, help="Sweep file (its verl settings, launcher and "
                                      "tracking are checked); default: the verl defaults."),
    overrides: list[str] = typer.Argument(None, help="Hydra overrides of the sweep."),
    results: Path = typer.Option(Path("results"), "--results", help="Results root."),
    on_node: bool = typer.Option(False, "--on-node", help="Also run the node-side checks "
                                 "(GPUs, flash-attn, vLLM attention, ALFWorld data, model) "
                                 "inside a one-node job of the sweep's launcher."),
) -> None:
    """Check the verl-agent checkout, the trainer environment, packages, MLflow, the sweep's
    launcher (Slurm, GPU slots) and disk here, and GPUs, flash-attn, the vLLM attention
    backend, ALFWorld data and the model where the runs execute (from a Slurm login node:
    with --on-node, in a one-node job); exit 1 when something needs fixing."""
    from ccpo_lab.backends import doctor_kinds, doctor_module

    sweep = None
    kinds = doctor_kinds()
    kind = kinds[0]  # without a sweep: the defaults of the backend with machine checks
    if sweep_file is not None:
        from ccpo_lab.cli.paths import sweep_file as find_sweep_file
        from ccpo_lab.config.sweep import load_sweep

        sweep = load_sweep(find_sweep_file(sweep_file), overrides or [])
        kind = sweep.config.backend.kind
        if kind not in kinds:
            raise UserError(f"doctor checks machines for the {' and '.join(kinds)} backend; "
                            f"this sweep uses backend {kind!r}", file=sweep_file,
                            key="backend.kind", value=kind)
    if on_node and sweep is None:
        raise UserError("--on-node needs a sweep file (its launcher runs the job)",
                        key="sweep_file")
    parts = [None] if sweep is None else sweep.per_environment()
    checks = list({c.line(): c for part in parts
                   for c in doctor_module(kind).run_doctor(part, results)}.values())
    if on_node:
        assert sweep is not None
        typer.echo("node-side checks: in a one-node job of the sweep's launcher "
                   f"({sweep.config.launcher.kind}), waiting for it ...", err=True)
        where, node = doctor_module(kind).run_on_node(sweep, results)
        names = {c.name for c in node}
        checks = [c for c in checks if not (c.status == "skip" and c.name in names)]
        checks += [type(c)(f"{c.name} [{where}]", c.status, c.detail) for c in node]
    for c in checks:
        typer.echo(c.line())
    bad = [c for c in checks if c.status == "FIX"]
    typer.echo(f"{len(bad)} to fix" if bad else "ready")
    if bad:
        raise typer.Exit(1)
