"""``ccpo-lab card SWEEP_DIR --arm A``: a model card for one arm, from the study itself;
with ``--weights`` an upload-ready folder beside it, with ``--push REPO`` uploaded."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from ccpo_lab.report.analysis import Report
    from ccpo_lab.report.card import CardInputs


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
    weights: bool = typer.Option(False, "--weights", help="Also write the chosen checkpoint's "
                                 "weights, per-step revisions (revisions/step_N) and "
                                 "manifest.json: an upload-ready folder."),
    push: str | None = typer.Option(None, "--push", help="Upload the folder to this Hugging "
                                    "Face repository (user-or-org/name; implies --weights; "
                                    "needs HF_TOKEN or a stored token)."),
) -> None:
    """Write a Hugging Face model card (README.md) for one arm of a study.

    Every number is one ``ccpo-lab report`` prints (with the sweep's analysis settings):
    the arm, its converged-window result, the best single evaluation with its bias, every
    arm side by side, what the study does and does not show, the training setup, the
    status (interim or final) and a citation. ``--weights``: the folder also holds the
    weights of the seed that represents the arm's result (its final checkpoint) and every
    checkpoint its run kept, as revisions step_N, with a manifest (docs/publishing.md).
    """
    from ccpo_lab.report.analysis import build_report
    from ccpo_lab.report.card import check_arm, gather_card

    if out is not None:
        from ccpo_lab.cli.paths import output_dir

        output_dir(out, "--out")
    token = None
    if push is not None:
        from ccpo_lab.publish.push import check_repo_id, require_token

        check_repo_id(push)
        token = require_token()
    rep = build_report(sweep_dir)
    check_arm(rep.model, arm)
    folder = out if out is not None else rep.sweep_dir / f"card-{arm}"
    inputs = gather_card(rep, arm, license)
    if not (weights or push):
        _card_only(folder, inputs)
        return
    doc = _folder(folder, rep, inputs)
    if push is not None and token is not None:
        from ccpo_lab.publish.push import push as upload

        typer.echo(f"pushed to {upload(folder, push, doc, token, say=typer.echo)}")


def _card_only(folder: Path, inputs: CardInputs) -> None:
    """The card alone: ``folder/README.md``."""
    from ccpo_lab.atomic import atomic_write_text
    from ccpo_lab.report.card import render_card

    target = folder / "README.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, render_card(inputs))
    typer.echo(f"wrote the model card of {inputs.arm} to {target}")


def _folder(folder: Path, rep: Report, inputs: CardInputs) -> dict[str, Any]:
    """The upload-ready folder (card, weights, revisions, manifest); its manifest."""
    from dataclasses import replace

    from ccpo_lab.publish.choose import choose
    from ccpo_lab.publish.folder import card_weights, check_destination, write_folder
    from ccpo_lab.report.card import render_card
    from ccpo_lab.runs.layout import RunDir

    check_destination(folder)
    choice = choose(rep, inputs.arm, inputs.backend)
    rd = RunDir(choice.run_dir)
    run = rd.read_run()
    text = render_card(replace(inputs, weights=card_weights(choice, run)))
    doc = write_folder(folder, text, choice, rd.read_config(), run, rep.model.sweep)
    revs = ", ".join(r["name"] for r in doc["revisions"])
    typer.echo(f"wrote the model card and weights of {inputs.arm} (seed {choice.seed}, "
               f"step {choice.main.step}{'' if choice.final else ', interim'}; revisions "
               f"{revs}) to {folder}")
    return doc
