"""``ccpo-lab verify SWEEP_DIR``: are the step-1 rollouts of every arm identical per seed?"""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add the ``verify`` command to ``app``."""
    app.command("verify")(verify)


def verify(
    sweep_dir: Path = typer.Argument(..., help="The sweep's results directory "
                                     "(<results>/<sweep name>)."),
    reference: str | None = typer.Option(None, "--reference", help="Arm the others are "
                                         "compared with (default: the sweep's reference)."),
) -> None:
    """Compare the step-1 rollout fingerprints of every arm, seed by seed.

    Prints identical / different per seed and, on a difference, the first diverging
    episode and turn with both observations and actions; per seed, how many step-1 groups
    hold rollouts that are not all identical. Exit code 0 when every seed is identical and
    its groups did not collapse, 1 when any differs, lacks a fingerprint, or has fewer than
    half of its step-1 groups distinct.
    """
    from ccpo_lab.cli.paths import environment_heading, sweep_dirs

    failed = 0
    for env, d in sweep_dirs(sweep_dir):
        heading = environment_heading(env, d)
        if heading:
            typer.echo(heading)
        failed += not _verify(d, reference)
    if failed:
        raise typer.Exit(1)


def _verify(sweep_dir: Path, reference: str | None) -> bool:
    """Verify one sweep directory; True when every seed is identical."""
    from ccpo_lab.runs.verify import collapse_line, format_checks, verify_sweep

    checks = verify_sweep(sweep_dir, reference)
    for line in format_checks(checks):
        typer.echo(line)
    bad = [c for c in checks if not c.ok]
    collapsed = collapse_line(checks)
    if bad:
        typer.echo(f"step-1 identity NOT verified for {len(bad)} of {len(checks)} seeds "
                   f"(seed {', '.join(str(c.seed) for c in bad)})", err=True)
    if collapsed:
        typer.echo(collapsed, err=True)
    if bad or collapsed:
        return False
    typer.echo(f"step-1 identity verified for all {len(checks)} seeds")
    return True
