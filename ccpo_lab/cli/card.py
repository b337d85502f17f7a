"""``ccpo-lab card SWEEP_DIR --arm A``: a model card for one arm, from the study itself."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add the ``card`` command to ``app``."""
    app.command("card")(card)


def card(
    sweep_dir: Path = typer.Argument(..., help="The sweep's results directory."),
    arm: str = typer.Option(..., "--arm", help="The arm the card is about (one of the "
                            "sweep's arms with a finished evaluation)."),
    out: Path | None = typer.Option(None, "--out", help="Write README.md into this "
                                    "directory (default: SWEEP_DIR/card-ARM)."),
    license: str = typer.Option("unknown", "--license", help="The card's license (a Hugging "
                                "Face license id; default unknown: the study states none)."),
) -> None:
    """Write a Hugging Face model card (README.md) for one arm of a study.

    Every number is one ``ccpo-lab report`` prints (with the sweep's analysis settings):
    the arm, its converged-window result, the best single evaluation with its bias, every
    arm side by side, what the study does and does not show, the training setup, the
    status (interim or final) and a citation.
    """
    from ccpo_lab.atomic import atomic_write_text
    from ccpo_lab.report.analysis import build_report
    from ccpo_lab.report.card import check_arm, gather_card, render_card

    if out is not None:
        from ccpo_lab.cli.paths import output_dir

        output_dir(out, "--out")
    rep = build_report(sweep_dir)
    check_arm(rep.model, arm)
    target = (out if out is not None else rep.sweep_dir / f"card-{arm}") / "README.md"
    text = render_card(gather_card(rep, arm, license))
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, text)
    typer.echo(f"wrote the model card of {arm} to {target}")
