"""``ccpo-lab arms list|show|diff``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from ccpo_lab.config.armspath import ArmsPath
    from ccpo_lab.config.schema import ArmConfig

app = typer.Typer(help="Inspect the arms along the arms path (--arms-dir, $CCPO_LAB_ARMS, "
                  "./arms, then the shipped arms).", no_args_is_help=True)

ArmsDir = typer.Option(None, "--arms-dir",
                       help="A folder of arm files, searched first (then $CCPO_LAB_ARMS, "
                            "./arms and the shipped arms).")


def _dir(arms_dir: Path | None) -> ArmsPath:
    from ccpo_lab.config.armspath import arms_path

    return arms_path(arms_dir)


@app.command("list")
def list_arms(arms_dir: Path | None = ArmsDir) -> None:
    """Table of arms: name, estimator, distinguishing flags, description."""
    from rich.console import Console
    from rich.table import Table

    from ccpo_lab.config.arms import arm_names, distinguishing_flags, load_arm
    from ccpo_lab.fitted import fitted

    d = _dir(arms_dir)
    arms = [load_arm(name, d) for name in arm_names(d)]
    table = Table(caption=f"arms path: {d.describe()}")
    table.add_column("arm", no_wrap=True)
    table.add_column("from", no_wrap=True)
    table.add_column("estimator", no_wrap=True)
    table.add_column("flags", overflow="fold")
    table.add_column("description")
    for arm in arms:
        flags = " ".join(f"{k}={v}" for k, v in distinguishing_flags(arm).items())
        summary = arm.description.split(": ")[0].split(". ")[0]
        table.add_row(arm.name, d.source(Path(arm.source)), arm.estimator.name, flags, summary)
    Console().print(fitted(table))
    for arm in arms:
        for other in arm.shadows:
            typer.secho(f"note: arm {arm.name}: {arm.source} shadows {other} (the first on "
                        "the arms path wins)", fg="yellow", err=True)


@app.command("show")
def show_arm(name: str, arms_dir: Path | None = ArmsDir,
             docs: bool = typer.Option(False, "--docs",
                                       help="Also list every estimator parameter: "
                                            "valid values and what it does.")) -> None:
    """The resolved arm as YAML, with lint warnings."""
    from ccpo_lab.config.arms import load_arm
    from ccpo_lab.config.yamlio import dump_yaml
    from ccpo_lab.estimators.spec import ESTIMATOR_PARAMS

    arm = load_arm(name, _dir(arms_dir))
    doc = {"name": arm.name, "description": arm.description, "extends_chain": list(arm.chain),
           "estimator": {"name": arm.estimator.name, **arm.estimator.params},
           "training": arm.training}
    typer.echo(dump_yaml(doc).rstrip())
    if docs:
        typer.echo(f"# {arm.estimator.name} parameters:")
        for p in ESTIMATOR_PARAMS[arm.estimator.name]:
            bound = f" [from protocol.{p.protocol}]" if p.protocol else ""
            typer.echo(f"#   {p.name} ({p.valid}; default {p.default!r}){bound}: {p.doc}")
    for w in arm.warnings:
        typer.secho(f"warning: {w}", fg="yellow", err=True)


@app.command("diff")
def diff_arms(a: str, b: str, arms_dir: Path | None = ArmsDir) -> None:
    """Key-level differences between two resolved arms."""
    from ccpo_lab.config.arms import load_arm
    from ccpo_lab.config.identity import diff

    d = _dir(arms_dir)
    arm_a, arm_b = load_arm(a, d), load_arm(b, d)

    def doc(arm: ArmConfig) -> dict[str, Any]:
        return {"estimator": {"name": arm.estimator.name, **arm.estimator.params},
                "training": arm.training}

    rows = diff(doc(arm_a), doc(arm_b))
    if not rows:
        typer.echo(f"{a} and {b} resolve to the same configuration")
        return
    width = max(len(k) for k, _, _ in rows)
    typer.echo(f"{'key':<{width}}  {a}  ->  {b}")
    for k, va, vb in rows:
        typer.echo(f"{k:<{width}}  {va!r}  ->  {vb!r}")
