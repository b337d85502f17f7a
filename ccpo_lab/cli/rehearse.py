"""``ccpo-lab rehearse SWEEP.yaml [OVERRIDES...]``: the sweep through verl-agent's real
trainer in minutes (:mod:`ccpo_lab.backends.verl.rehearsal`)."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add the ``rehearse`` command to ``app``."""
    app.command("rehearse")(rehearse)


def rehearse(
    sweep_file: Path = typer.Argument(..., help="A verl sweep file (sweeps/*.yaml)."),
    overrides: list[str] = typer.Argument(None, help="Hydra overrides, as for `ccpo-lab "
                                          "sweep` (e.g. backend.verl.python=... "
                                          "launcher=inline)."),
    results: Path = typer.Option(Path("results"), "--results", help="Results root; the "
                                 "rehearsal goes to <results>/<sweep>-rehearsal/."),
    device: str = typer.Option("auto", "--device", help="auto (cuda when the trainer "
                               "environment sees a GPU here), cpu or cuda."),
    steps: int = typer.Option(2, "--steps", help="Training steps per run (2..20)."),
    seeds: int = typer.Option(2, "--seeds", help="How many of the sweep's seeds (1..8)."),
    no_resume_check: bool = typer.Option(False, "--no-resume-check", help="Skip the "
                                         "kill-and-resume check."),
) -> None:
    """Rehearse a verl sweep before it burns GPU-hours: every arm, 2 seeds, 2 steps,
    through the sweep's own launcher, with verl-agent's real trainer and a tiny model
    built on the spot; then check it, one line each. Exit 0 only when every check passes.

    Checks: the trainer started and finished every run; metrics.jsonl has every step,
    finite, with a non-zero actor/grad_norm; advantages are non-zero in every arm; verify
    (step-1 rollouts identical across the arms of a seed, groups not collapsed, the seeds'
    game streams disjoint); a run stopped after its first checkpoint resumes there and logs
    what an uninterrupted run logs; the best and final Hugging Face weights load and
    generate; report and sync succeed. Without a GPU it runs on the CPU (the CPU adapter).
    """
    from ccpo_lab.backends.verl.rehearsal import (
        RehearsalSettings,
        prepare,
        run_rehearsal,
    )
    from ccpo_lab.cli.paths import output_dir

    output_dir(results, "--results")
    _one_environment(sweep_file, overrides or [])
    settings = RehearsalSettings(steps=steps, seeds=seeds, device=device,
                                 resume_check=not no_resume_check)

    def say(line: str) -> None:
        typer.echo(line, err=True)

    reh = prepare(sweep_file, overrides or [], results, settings, say=say)
    m = reh.model_info
    say(f"rehearsal {reh.sweep.name} -> {reh.sweep_dir}: {len(reh.sweep.arms)} arms x "
        f"{len(reh.sweep.config.seeds)} seeds x {settings.steps} steps on {reh.device} "
        f"({reh.machine.gpus} GPU(s) seen); tiny model {m.get('parameters')} parameters, "
        f"fitted answers in the format {m.get('sample_check', {}).get('format_share', 0):.0%}")
    checks = run_rehearsal(reh, say=say)
    for c in checks:
        typer.echo(c.line())
    failed = [c for c in checks if not c.ok]
    typer.echo(f"{len(checks) - len(failed)} of {len(checks)} checks passed; "
               f"{reh.sweep_dir / 'rehearsal.json'}")
    if failed:
        raise typer.Exit(1)


def _one_environment(sweep_file: Path, overrides: list[str]) -> None:
    """A rehearsal plays one environment: refuse a sweep over several in one line naming
    the override that picks one."""
    from ccpo_lab.cli.paths import sweep_file as find_sweep_file
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.errors import UserError

    path = find_sweep_file(sweep_file)
    sw = load_sweep(path, overrides)
    if sw.multi_environment:
        raise UserError("a rehearsal plays one environment; rehearse each with "
                        f"environments=[{sw.environments[0]}] (and so on)", file=path,
                        key="environments", value=sw.environments)
