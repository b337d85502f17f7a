"""``ccpo-lab sync SWEEP_DIR``: bring MLflow (and W&B) up to date with the run files."""

from __future__ import annotations

from pathlib import Path

import typer

from ccpo_lab.errors import UserError
from ccpo_lab.textout import safe


def register(app: typer.Typer) -> None:
    """Add the ``sync`` command to ``app``."""
    app.command("sync")(sync)


def sync(
    sweep_dir: Path = typer.Argument(..., help="The sweep's results directory."),
    uri: str | None = typer.Option(None, "--uri", help="Tracking URI (default: "
                                   "MLFLOW_TRACKING_URI, else the sweep's tracking.uri, "
                                   "else sqlite:///<sweep dir>/mlflow.db)."),
    experiment: str | None = typer.Option(None, "--experiment", help="Experiment name "
                                          "(default: MLFLOW_EXPERIMENT_NAME, else the "
                                          "sweep's tracking.experiment, else its name)."),
    report_dir: Path | None = typer.Option(None, "--report", help="A report directory "
                                           "(report --out) to log as the parent's artifacts "
                                           "(`report --out` syncs by itself, with the "
                                           "report's headline numbers)."),
    watch: bool = typer.Option(False, "--watch", help="Keep syncing while the runs go "
                               "(every --every seconds); stop by itself after a last round "
                               "once nothing runs."),
    every: float = typer.Option(30.0, "--every", min=1.0, help="Seconds between two rounds "
                                "of --watch."),
    follow_pid: int | None = typer.Option(None, "--follow-pid", hidden=True,
                                          help="With --watch: also go on while this process "
                                          "lives (sweep --wait)."),
    wandb: bool = typer.Option(False, "--wandb", help="Also push the runs (and the report's "
                               "numbers) to Weights & Biases: the sweep's tracking.wandb, "
                               "else online to a project named after the sweep."),
    wandb_mode: str | None = typer.Option(None, "--wandb-mode", help="online | offline "
                                          "(default: WANDB_MODE, else the sweep's "
                                          "tracking.wandb.mode, else online)."),
    wandb_project: str | None = typer.Option(None, "--wandb-project", help="W&B project "
                                             "(default: WANDB_PROJECT, else the sweep's, "
                                             "else its name)."),
    wandb_entity: str | None = typer.Option(None, "--wandb-entity", help="W&B entity "
                                            "(default: WANDB_ENTITY, else the sweep's)."),
) -> None:
    """Sync every run of the sweep to MLflow (and W&B): idempotent and incremental.

    One parent run per sweep, a nested child per (arm, seed) with params, tags, metrics
    and the report's per-run summary (summary/window_mean); only rows not yet there are
    sent. What is not sent is named on standard error; exit 1 when a run directory was
    not synced, or not whole. An unreachable store loses nothing: sync again later.
    --watch keeps it current while the runs go; --wandb pushes to Weights & Biases too.
    Where it goes: a flag, else the environment (MLFLOW_TRACKING_URI,
    MLFLOW_EXPERIMENT_NAME, WANDB_*), else the sweep's tracking section, else the default.
    A sweep over several environments: each environment's directory in turn.
    """
    from ccpo_lab.cli.paths import environment_heading, sweep_dirs
    from ccpo_lab.tracking.store import http_defaults

    _check_wandb_flags(wandb, wandb_mode, wandb_project, wandb_entity)
    http_defaults()
    ok = True
    for env, d in sweep_dirs(sweep_dir):
        heading = environment_heading(env, d)
        if heading:
            typer.echo(heading, err=True)
        report = report_dir if env is None or report_dir is None else report_dir / env
        done = _watch(d, uri, experiment, every, follow_pid) if watch else \
            _once(d, uri, experiment, report if report and report.is_dir() else None, wandb)
        ok = (not wandb or _wandb(d, wandb_mode, wandb_project, wandb_entity)) and done and ok
    if not ok:
        raise typer.Exit(1)


def _check_wandb_flags(wandb: bool, mode: str | None, project: str | None,
                       entity: str | None) -> None:
    """The W&B flags: a known mode, and only with ``--wandb``."""
    if mode is not None and mode not in ("online", "offline"):
        raise UserError("unknown W&B mode", key="--wandb-mode", value=mode,
                        valid=["online", "offline"])
    if (mode or project or entity) and not wandb:
        raise UserError("--wandb-mode, --wandb-project and --wandb-entity go with --wandb",
                        key="--wandb")


def _once(sweep_dir: Path, uri: str | None, experiment: str | None, report_dir: Path | None,
          wandb: bool) -> bool:
    """One MLflow sync; False when it failed (said, nothing lost). With ``wandb``, a sweep
    whose MLflow tracking is off is not an error (W&B goes on)."""
    from ccpo_lab.tracking.mlflow_sync import sync_sweep
    from ccpo_lab.tracking.store import StoreUnreachable

    try:
        res = sync_sweep(sweep_dir, uri, experiment, report_dir,
                         say=lambda line: typer.echo(line, err=True))
    except StoreUnreachable as e:
        typer.echo(f"sync failed: {e} -- nothing was lost; run `ccpo-lab sync` again once it "
                   "answers", err=True)
        return False
    except UserError as e:
        if not (wandb and "tracking is disabled" in str(e)):
            raise
        typer.echo(f"MLflow: not synced ({str(e).splitlines()[0]})", err=True)
        return True
    except Exception as e:  # noqa: BLE001 - MLflow raises many kinds; say what and retry
        typer.echo(f"sync failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                   " -- nothing was lost; run `ccpo-lab sync` again later", err=True)
        return False
    for w in res.warnings:
        typer.secho(f"warning: {safe(w)}", fg="yellow", err=True)
    typer.echo(res.summary())
    if res.incomplete:
        n = res.incomplete
        typer.echo(f"sync: {n} run director{'y' if n == 1 else 'ies'} not synced, or not "
                   f"whole (named above): mend {'it' if n == 1 else 'them'} and run "
                   "`ccpo-lab sync` again", err=True)
        return False
    return True


def _watch(sweep_dir: Path, uri: str | None, experiment: str | None, every: float,
           follow_pid: int | None) -> bool:
    """``--watch``: rounds until nothing runs; SIGTERM or Ctrl-C asks for a last round.
    True when the last round left the store current (else exit 1)."""
    import signal
    import threading

    from ccpo_lab.tracking.live import watch

    stop = threading.Event()

    def ask(signum: int, frame: object) -> None:
        if stop.is_set():  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        stop.set()

    old = {s: signal.signal(s, ask) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        typer.echo(f"watching {sweep_dir}: a sync every {every:g} s until nothing runs "
                   "(Ctrl-C: a last round, then stop)", err=True)
        end = watch(sweep_dir, uri=uri, experiment=experiment, every=every,
                    follow_pid=follow_pid, say=lambda line: typer.echo(line, err=True),
                    stop=stop)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if end.last is not None:
        for w in end.last.warnings:
            typer.secho(f"warning: {safe(w)}", fg="yellow", err=True)
        typer.echo(end.last.summary())
    typer.echo(f"watch ended after {end.rounds} rounds ({end.failed} failed): "
               + ("the store is current" if end.ok else
                  "the last round failed -- nothing was lost; run `ccpo-lab sync` again"))
    if not end.ok:
        raise typer.Exit(1)
    return True


def _wandb(sweep_dir: Path, mode: str | None, project: str | None, entity: str | None
           ) -> bool:
    """``--wandb``: push the sweep and its report's numbers to W&B; False when it failed."""
    from ccpo_lab.tracking.wandb_sync import sync_wandb

    report = None
    try:
        from ccpo_lab.report.analysis import build_report

        report = build_report(sweep_dir).model
    except UserError as e:
        typer.echo(f"W&B: no report numbers for the group's summary ({str(e).splitlines()[0]})",
                   err=True)
    try:
        res = sync_wandb(sweep_dir, mode=mode, project=project, entity=entity, report=report,
                         say=lambda line: typer.echo(line, err=True))
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - W&B raises many kinds; nothing is lost
        typer.echo(f"W&B sync failed: {type(e).__name__}: "
                   f"{str(e).splitlines()[0] if str(e) else ''} -- nothing was lost; run "
                   "`ccpo-lab sync --wandb` again later", err=True)
        return False
    for w in res.warnings:
        typer.secho(f"warning: {safe(w)}", fg="yellow", err=True)
    typer.echo(res.summary())
    return True
