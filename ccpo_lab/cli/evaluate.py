"""``ccpo-lab evaluate SWEEP_DIR``: re-score checkpoints on one common draw of games."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add the ``evaluate`` command to ``app``."""
    app.command("evaluate")(evaluate)


def evaluate(
    sweep_dir: Path = typer.Argument(..., help="The sweep's results directory."),
    checkpoint: str = typer.Option("final", "--checkpoint", help="final | best | STEP | all "
                                   "(every checkpoint the runs kept)."),
    split: str = typer.Option("both", "--split", help="in (held-out games of the training "
                              "distribution) | out (out of distribution) | both."),
    episodes: int | None = typer.Option(None, "--episodes", help="Games per evaluation "
                                        "(default: the training-time evaluation's episodes, "
                                        "at most the split's games)."),
    repeats: int = typer.Option(1, "--repeats", help="Episodes per game, each with its own "
                                "sampling seed."),
    temperature: float | None = typer.Option(None, "--temperature", help="Sampling "
                                             "temperature (default: the run's "
                                             "protocol.val_temperature; 0: greedy)."),
    arm: str | None = typer.Option(None, "--arm", help="Only this arm's runs."),
    seed: int | None = typer.Option(None, "--seed", help="Only this seed's runs."),
    wait: bool = typer.Option(False, "--wait", help="Wait for every evaluation; exit 1 "
                              "unless all are done."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; write nothing."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Resubmit failed jobs."),
    launcher: str | None = typer.Option(None, "--launcher", help="inline | local | slurm "
                                        "with its default settings (default: the sweep's "
                                        "launcher, as sweep.json records it)."),
    reference: list[str] = typer.Option([], "--reference", help="Also evaluate a policy no "
                                        "run trained, on the same draw (repeatable): base "
                                        "(the protocol's base model), a Hugging Face folder, "
                                        "or a Hub id ORG/NAME[@REVISION] (HF_HUB_OFFLINE=1: "
                                        "from the local cache only)."),
) -> None:
    """Re-score the runs' checkpoints on one common draw of games, in and out of
    distribution; `ccpo-lab report` then shows the tables and where the uncertainty
    comes from (seeds or episodes).

    Every arm and seed plays the same games in the same order, with the same sampling
    seed per (seed, game, repeat). One job per run goes through the sweep's launcher;
    a finished evaluation is never redone (its file evals/<key>.jsonl is kept), an
    interrupted job resumes at its next unfinished repeat. A --reference plays each seed's
    draw too (same games, sampling seeds, splits, temperature); the report compares the
    arms with it game by game.
    """
    from ccpo_lab.cli.paths import environment_heading, sweep_dirs
    from ccpo_lab.evaluation.launch import launch_evaluations
    from ccpo_lab.evaluation.reference import resolve
    from ccpo_lab.evaluation.spec import parse_request

    found = sweep_dirs(sweep_dir)
    request = parse_request(checkpoint, split, episodes, repeats, temperature, arm, seed)
    refs = list({r.identity: r for r in map(resolve, reference)}.values())
    code = 0
    for env, d in found:
        heading = environment_heading(env, d)
        if heading:
            typer.echo(heading)
        code = max(code, launch_evaluations(d, request, wait=wait, dry_run=dry_run,
                                            retry_failed=retry_failed,
                                            launcher_kind=launcher, references=refs))
    if code:
        raise typer.Exit(code)
