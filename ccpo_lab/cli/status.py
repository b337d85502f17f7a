"""``ccpo-lab status SWEEP_DIR``: a table of the sweep's runs (``--watch`` refreshes it)."""

from __future__ import annotations

from pathlib import Path

import typer


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
    """Show each run's state, job, progress, last held-out success and logs, then the
    sweep's evaluation jobs (`ccpo-lab evaluate`), if any.

    Reads the run directories and asks the scheduler once (with a short timeout); it never
    waits for a job. A failed run shows its exception and the tail of its stderr.
    """
    import json

    from ccpo_lab.errors import UserError
    from ccpo_lab.launch.display import make_console, print_status
    from ccpo_lab.launch.display import watch as watch_loop
    from ccpo_lab.launch.status import collect_status
    from ccpo_lab.runs.layout import SweepDir
    from ccpo_lab.runs.owner import owner_record

    if not sweep_dir.is_dir():
        raise UserError("not a directory", file=sweep_dir,
                        valid="a sweep's results directory, e.g. results/<sweep name>")
    runs = SweepDir(sweep_dir).run_dirs()
    if not runs:
        raise UserError("no runs found (expected <arm>/seed-<k>/run.json or sweep.json)",
                        file=sweep_dir)
    console = make_console()
    title = f"sweep {sweep_dir.name} ({sweep_dir})"
    from ccpo_lab.evaluation.track import eval_status, print_eval_status, status_records

    if as_json:
        rows = collect_status(sweep_dir, runs)
        evals = eval_status(sweep_dir)
        typer.echo(json.dumps([{**r.__dict__, "path": str(r.path), "terminal": r.terminal,
                                "owner": owner_record(r.owner), "log": r.log, **extra}
                               for r, extra in [*((r, {}) for r in rows),
                                                *((r, {"evaluation": e}) for r, e in
                                                  zip(evals, status_records(evals),
                                                      strict=True))]],
                              indent=2, default=str))
        return
    if watch:
        rows = watch_loop(sweep_dir, console, runs=runs, interval=interval, title=title)
        if not console.is_terminal:
            print_status(console, rows, title)
        else:
            from ccpo_lab.launch.display import failure_details

            for block in failure_details(rows):
                console.print(block, highlight=False, markup=False, soft_wrap=True)
        print_eval_status(console, sweep_dir)
        return
    print_status(console, collect_status(sweep_dir, runs), title)
    print_eval_status(console, sweep_dir)
