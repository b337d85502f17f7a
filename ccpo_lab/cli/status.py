"""``ccpo-lab status SWEEP_DIR``: a table of the sweep's runs (``--watch`` refreshes it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ccpo_lab.errors import UserError

if TYPE_CHECKING:
    from ccpo_lab.launch.status import RunStatus


def register(app: typer.Typer) -> None:
    """Add the ``status`` command to ``app``."""
    app.command("status")(status)


def status(
    sweep_dir: Path = typer.Argument(..., help="The sweep's results directory "
                                     "(<results>/<sweep name>)."),
    watch: bool = typer.Option(False, "--watch", help="Refresh with progress bars until "
                               "every run is finished (Ctrl-C to stop watching)."),
    interval: float = typer.Option(2.0, "--interval", min=0.2, help="Seconds between "
                                   "refreshes with --watch."),
    as_json: bool = typer.Option(False, "--json", help="Print the runs as JSON."),
) -> None:
    """Show each run's state, job, progress, last held-out success and logs, the
    device-hours (GPU-hours, CPU-hours) used with a projection for the whole sweep, then
    the sweep's evaluation jobs (`ccpo-lab evaluate`), if any.

    Reads the run directories and asks the scheduler once (with a short timeout); it never
    waits for a job. A failed run shows its exception and the tail of its stderr.
    """

    from ccpo_lab.cli.paths import environment_heading, sweep_dirs

    found = sweep_dirs(sweep_dir)
    if as_json:
        import json

        records = [r for env, d in found for r in _records(d, env)]
        typer.echo(json.dumps(records, indent=2, default=str))
        return
    for env, d in found:
        heading = environment_heading(env, d)
        if heading:
            typer.echo(heading)
        _status(d, watch, interval)


def _status(sweep_dir: Path, watch: bool, interval: float) -> None:
    """The status of one sweep directory."""
    from ccpo_lab.launch.display import make_console, print_status
    from ccpo_lab.launch.display import watch as watch_loop
    from ccpo_lab.launch.status import collect_status
    from ccpo_lab.runs.layout import SweepDir

    runs = SweepDir(sweep_dir).run_dirs()
    if not runs:
        raise UserError("no runs found (expected <arm>/seed-<k>/run.json or sweep.json)",
                        file=sweep_dir)
    console = make_console()
    title = f"sweep {sweep_dir.name} ({sweep_dir})"
    from ccpo_lab.evaluation.track import print_eval_status

    if watch:
        rows = watch_loop(sweep_dir, console, runs=runs, interval=interval, title=title)
        if not console.is_terminal:
            print_status(console, rows, title)
        else:
            from ccpo_lab.launch.display import failure_details

            for block in failure_details(rows):
                console.print(block, highlight=False, markup=False, soft_wrap=True)
        _cost(console, rows)
        print_eval_status(console, sweep_dir)
        return
    rows = collect_status(sweep_dir, runs)
    print_status(console, rows, title)
    _cost(console, rows)
    print_eval_status(console, sweep_dir)


def _records(sweep_dir: Path, env: str | None) -> list[dict[str, Any]]:
    """``--json``: every run (with its device-hours), then every evaluation job; with
    ``env`` (one environment of a sweep over several) each record names it."""
    from ccpo_lab.runs.layout import SweepDir

    runs = SweepDir(sweep_dir).run_dirs()
    if not runs:
        raise UserError("no runs found (expected <arm>/seed-<k>/run.json or sweep.json)",
                        file=sweep_dir)
    records = _as_records(sweep_dir, runs)
    return records if env is None else [{"environment": env, **r} for r in records]


def _as_records(sweep_dir: Path, runs: list[Any]) -> list[dict[str, Any]]:
    """Every run (with its device-hours), then every evaluation job."""
    from ccpo_lab.evaluation.track import eval_status, status_records
    from ccpo_lab.launch.costline import sweep_usage
    from ccpo_lab.launch.status import collect_status
    from ccpo_lab.runs.owner import owner_record

    rows = collect_status(sweep_dir, runs)
    usage = sweep_usage(rows)
    spent = usage.per_run if usage is not None else {}
    unit = usage.unit if usage is not None else None
    evals = eval_status(sweep_dir)
    records = [{**r.__dict__, "path": str(r.path), "terminal": r.terminal,
                "owner": owner_record(r.owner), "log": r.log,
                "device_hours": spent.get(str(r.path)), "device_unit": unit} for r in rows]
    records += [{**r.__dict__, "path": str(r.path), "terminal": r.terminal,
                 "owner": owner_record(r.owner), "log": r.log, "evaluation": e}
                for r, e in zip(evals, status_records(evals), strict=True)]
    return records


def _cost(console: Any, rows: list[RunStatus]) -> None:
    """The device-hours used and projected (:mod:`ccpo_lab.launch.costline`), if known."""
    from ccpo_lab.launch.costline import cost_line

    line = cost_line(rows)
    if line:
        console.print(line, highlight=False, markup=False, soft_wrap=True)
