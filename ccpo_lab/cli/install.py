"""``ccpo-lab install-into PYTHON``: ccpo-lab into a trainer's environment (verl-agent's),
never changing its torch, vLLM, transformers, flash-attn or verl."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add the ``install-into`` command to ``app``."""
    app.command("install-into")(install_into)


def default_spec() -> str:
    """This ccpo-lab: its source folder when it runs from one, else its release."""
    import ccpo_lab

    root = Path(ccpo_lab.__file__).resolve().parents[1]
    if (root / "pyproject.toml").is_file() and (root / "ccpo_lab").is_dir():
        return str(root)
    return f"ccpo-lab=={ccpo_lab.__version__}"


def install_into(
    python: str = typer.Argument(..., help="The trainer environment's interpreter "
                                 "(backend.verl.python), e.g. /opt/verl-agent-env/bin/python."),
    source: str = typer.Option(None, "--from", help="What to install (a folder, a wheel, "
                               "or a requirement); default: this ccpo-lab."),
    keep: list[str] = typer.Option([], "--keep", help="Another package never to change "
                                   "(repeatable), beside torch, vllm, transformers, "
                                   "flash-attn and verl."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print pip's plan; install "
                                 "nothing."),
) -> None:
    """Install ccpo-lab (its light base: no torch, ray, verl or alfworld) into PYTHON's
    environment with pip, each of the trainer's packages pinned where it is: refused
    (exit 2, nothing changed) when pip would change one; then pip check."""
    from ccpo_lab.backends.verl.install import install_into as run

    spec = source or default_spec()
    plan, check = run(python, spec, keep, dry_run)
    kept = ", ".join(f"{n} {v}" for n, v in plan.kept.items() if v) or "none installed"
    typer.echo(f"trainer's packages kept: {kept}")
    names = ", ".join(f"{n} {v}" for n, v in plan.installs) or "nothing"
    typer.echo(f"{'would install' if dry_run else 'installed'}: {names}")
    if not dry_run:
        typer.echo(f"pip check: {check}")
        typer.echo(f"next: {python} -m ccpo_lab.backends.verl.trainer_env --check")
