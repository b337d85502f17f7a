"""``ccpo-lab report SWEEP_DIR``: what the sweep shows, and what it does not."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ccpo_lab.config.analysis import setting_help
from ccpo_lab.textout import safe

if TYPE_CHECKING:
    from ccpo_lab.report.across import AcrossSection
    from ccpo_lab.report.analysis import Report
    from ccpo_lab.tracking.mlflow_sync import SyncResult

FORMAT_NAMES = ("md", "csv", "latex", "json")
"""``--format``'s choices as its help lists them (:data:`ccpo_lab.report.output.FORMATS`,
which a test holds equal: the report package is imported only when a report is made)."""
FORMAT_HELP = (f"{' | '.join(FORMAT_NAMES)} (json: the machine-readable document alone on "
               "stdout). Default md; with --out, nothing but the closing note unless given.")


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to ``app``."""
    app.command("report")(report)


def report(
    sweep_dir: Path = typer.Argument(..., help="The sweep's results directory."),
    fmt: str | None = typer.Option(None, "--format", help=FORMAT_HELP),
    out: Path | None = typer.Option(None, "--out", help="Write every format, the CSV tables, "
                                    "the figures (PNG and PDF) and the JSON into this "
                                    "directory."),
    metric: str | None = typer.Option(None, "--metric", help=setting_help("metric")),
    window_start: int | None = typer.Option(None, "--window-start",
                                            help=setting_help("window_start")),
    reference: str | None = typer.Option(None, "--reference", help=setting_help("reference")),
    confidence: float | None = typer.Option(None, "--confidence",
                                            help=setting_help("confidence")),
    bootstrap_reps: int | None = typer.Option(None, "--bootstrap-reps",
                                              help=setting_help("bootstrap_reps")),
    alpha: float | None = typer.Option(None, "--alpha", help=setting_help("alpha")),
    power: float | None = typer.Option(None, "--power", help=setting_help("power")),
    seed: int = typer.Option(0, "--bootstrap-seed", min=0,
                             help="Seed of the bootstrap generator (>= 0)."),
    sync: bool = typer.Option(True, "--sync/--no-sync", help="With --out: sync the runs and "
                              "log the report to MLflow (when the sweep's tracking is on)."),
) -> None:
    """Tables of the sweep: per arm, comparisons, per task type, per seed, and figures.

    Settings come from the options, else the sweep's ``analysis`` (sweep.json), else the
    defaults (needed for a directory built by ``ccpo-lab import`` alone). With ``--out``
    the report is written as files and the closing note lists them (the report itself
    goes to standard output only when ``--format`` is given).
    """
    # Each setting option's help is its field's docstring (ccpo_lab.config.analysis).
    from ccpo_lab.errors import UserError
    from ccpo_lab.report.analysis import build_report
    from ccpo_lab.report.output import FORMATS, render

    if fmt is not None and fmt not in FORMATS:
        raise UserError("unknown report format", key="--format", value=fmt, valid=FORMATS)
    if out is not None:
        from ccpo_lab.cli.paths import output_dir

        output_dir(out, "--out")
    options = {"metric": metric, "window_start": window_start, "reference": reference,
               "confidence": confidence, "bootstrap_reps": bootstrap_reps, "alpha": alpha,
               "power": power}
    from ccpo_lab.runs.family import is_family

    if is_family(sweep_dir):
        _across(sweep_dir, options, seed, fmt, out, sync)
        return
    rep = build_report(sweep_dir, options, rng_seed=seed)
    shown = fmt or ("md" if out is None else None)
    text = render(rep.model, shown) if shown else None
    if shown in ("json", "csv"):
        notes = [n.text for n in rep.model.notes]
        if rep.model.baselines.note:
            notes.append(rep.model.baselines.note)
        for note in notes:
            typer.echo(f"note: {note}", err=True)
    if out is not None:
        _write(rep, out, sync, closing_to_stderr=text is not None)
    if text is not None:
        typer.echo(text, nl=not text.endswith("\n"))


def _write(rep: Report, out: Path, sync: bool, closing_to_stderr: bool
           ) -> SyncResult | None:
    """Write every file into ``out``; then sync to MLflow unless disabled (never fatal).

    The closing note (what was written, each figure and what it shows, MLflow) goes to
    standard output, or to standard error when the report itself is printed there.
    """
    from ccpo_lab.report.output import figure_list, write_all
    from ccpo_lab.runs.sweep_runs import read_sweep_config

    def say(line: str) -> None:
        typer.echo(line, err=closing_to_stderr)

    written = write_all(rep, out)
    names = [p.name for p in written if p.suffix not in (".png", ".pdf")]
    say(f"wrote {len(written)} files to {out}: {', '.join(names)}, and the figures:")
    for files, what in figure_list():
        say(f"  {files}: {what}")
    enabled = read_sweep_config(rep.sweep_dir).get("tracking", {}).get("enabled", True)
    if not sync or enabled is False:
        return None
    from ccpo_lab.tracking.store import http_defaults

    http_defaults()
    from ccpo_lab.tracking.mlflow_sync import sync_sweep

    try:
        res = sync_sweep(rep.sweep_dir, artifacts=out, report=rep.model,
                         say=lambda line: typer.echo(line, err=True))
    except Exception as e:  # noqa: BLE001 - the report stands without MLflow
        msg = str(e).splitlines()[0] if str(e) else ""
        typer.secho(f"warning: MLflow sync failed ({type(e).__name__}: {msg}); the report "
                    "is written; run `ccpo-lab sync` later", fg="yellow", err=True)
        return None
    for w in res.warnings:
        typer.secho(f"warning: {safe(w)}", fg="yellow", err=True)
    for line in res.summary().splitlines():
        say(line)
    return res


def _across(folder: Path, options: dict[str, str | int | float | None], seed: int, fmt: str | None,
            out: Path | None, sync: bool) -> None:
    """A sweep over several environments: each environment's report (into
    ``<out>/<environment>/`` with ``--out``), then the cross-environment section
    (:mod:`ccpo_lab.report.across`; ``<out>/across.*``). Printed: every environment's
    report under its heading, then the section (``--format json``: one document of both;
    ``csv`` / ``latex``: the section's)."""
    from ccpo_lab.cli.paths import environment_heading, sweep_dirs
    from ccpo_lab.report.across import across_section
    from ccpo_lab.report.across_output import (
        across_csv,
        across_json,
        across_latex,
        across_markdown,
        write_across,
    )
    from ccpo_lab.report.analysis import build_report
    from ccpo_lab.report.output import render

    reports = {str(env): build_report(d, options, rng_seed=seed)
               for env, d in sweep_dirs(folder)}
    section = across_section({e: r.model for e, r in reports.items()})
    if out is not None:
        synced = []
        for env, d in sweep_dirs(folder):
            typer.echo(environment_heading(env, d), err=fmt is not None)
            synced.append((d, _write(reports[str(env)], out / str(env), sync,
                                     closing_to_stderr=fmt is not None)))
        written = write_across(section, out)
        say = (lambda line: typer.echo(line, err=True)) if fmt else typer.echo
        say(f"wrote {len(written)} files to {out}: {', '.join(p.name for p in written)} "
            "(the report across environments; each environment's in its folder)")
        _log_across(section, synced)
    shown = fmt or ("md" if out is None else None)
    if shown == "json":
        import json

        doc = {"environments": {e: json.loads(render(r.model, "json"))
                                for e, r in reports.items()},
               "across": json.loads(across_json(section))}
        typer.echo(json.dumps(doc, indent=2))
    elif shown == "md":
        for e, r in reports.items():
            typer.echo(f"# Environment {e}\n")
            typer.echo(render(r.model, "md"))
        typer.echo(across_markdown(section))
    elif shown is not None:
        typer.echo(across_csv(section) if shown == "csv" else across_latex(section), nl=False)


def _log_across(section: AcrossSection, synced: list[tuple[Path, SyncResult | None]]) -> None:
    """The cross-environment section on each synced environment's parent run
    (:mod:`ccpo_lab.tracking.across`); never fatal."""
    from ccpo_lab.tracking.across import log_across

    for d, res in synced:
        if res is None:
            continue
        try:
            log_across(res.uri, res.parent_run_id, section, d)
        except Exception as e:  # noqa: BLE001 - the report stands without MLflow
            typer.secho(f"warning: the section across environments was not logged to "
                        f"MLflow ({type(e).__name__})", fg="yellow", err=True)
