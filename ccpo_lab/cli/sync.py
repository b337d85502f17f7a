"""``ccpo-lab sync SWEEP_DIR``: bring MLflow up to date with the run files."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add the ``sync`` command to ``app``."""
    app.command("sync")(sync)


def sync(
    sweep_dir: Path = typer.Argument(..., help="The sweep's results directory."),
    uri: str | None = typer.Option(None, "--uri", help="Tracking URI (default: the sweep's "
                                   "tracking.uri, else sqlite:///<sweep dir>/mlflow.db)."),
    experiment: str | None = typer.Option(None, "--experiment", help="Experiment name "
                                          "(default: the sweep's name)."),
    report_dir: Path | None = typer.Option(None, "--report", help="A report directory "
                                           "(report --out) to log as the parent's artifacts "
                                           "(`report --out` syncs by itself, with the "
                                           "report's headline numbers)."),
) -> None:
    """Sync every run of the sweep to MLflow: idempotent and incremental.

    One parent run per sweep (the sweep's settings, a description), a nested child per
    (arm, seed) with params, tags, metrics and its training's start and end. Only rows
    not yet in MLflow are sent, streamed; one sync per store at a time (a second one
    waits). What is not sent (a line that is not a row, a value that is not usable, a
    directory that is not a run of its place, a run file that cannot be read) is named on
    standard error; the exit code is 1 when a run directory was not synced, or not whole.
    When the store is unreachable nothing is lost: run sync again later; a full or
    read-only disk is said with what to do. Prints how to open the UI with the runs
    grouped by arm.
    """
    from ccpo_lab.errors import UserError
    from ccpo_lab.tracking.store import StoreUnreachable, http_defaults

    http_defaults()
    from ccpo_lab.tracking.mlflow_sync import sync_sweep

    def say(line: str) -> None:
        typer.echo(line, err=True)

    try:
        res = sync_sweep(sweep_dir, uri, experiment, report_dir, say=say)
    except StoreUnreachable as e:
        typer.echo(f"sync failed: {e} -- nothing was lost; run `ccpo-lab sync` again once it "
                   "answers", err=True)
        raise typer.Exit(1) from None
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - MLflow raises many kinds; say what and retry
        typer.echo(f"sync failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                   " -- nothing was lost; run `ccpo-lab sync` again later", err=True)
        raise typer.Exit(1) from None
    for w in res.warnings:
        typer.secho(f"warning: {w}", fg="yellow", err=True)
    typer.echo(res.summary())
    if res.incomplete:
        n = res.incomplete
        typer.echo(f"sync: {n} run director{'y' if n == 1 else 'ies'} not synced, or not "
                   f"whole (named above): mend {'it' if n == 1 else 'them'} and run "
                   "`ccpo-lab sync` again", err=True)
        raise typer.Exit(1)
