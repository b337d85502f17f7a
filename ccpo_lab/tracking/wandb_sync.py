"""``ccpo-lab sync --wandb``: a finished, running or imported sweep into Weights & Biases.

Every run directory becomes (or continues) its W&B run, under the identity its training
used (:func:`ccpo_lab.runs.wandb_run.identity`: same id, group, job type, name and
config), so a run that logged live is continued, not copied. What W&B already holds is
not sent again:

* ``online``: W&B says where the run stands (``wandb.init(resume="allow")`` returns its
  ``starting_step``); only rows from there are logged;
* ``offline``: the run's offline directories (``<run>/wandb/offline-run-*-<id>``) are read
  with W&B's own reader (:func:`ccpo_lab.runs.wandb_run.inspect`): rows after their
  last step are written to a new offline directory of the same id (``wandb sync`` uploads
  them in order).

A run whose rows and summary are all in W&B already (``run.json["wandb"]`` records the last
step and the summary sent to this destination) is not opened at all, so a second sync
writes nothing. Each run's summary gets its ``summary/*`` and ``cost/*``
(:mod:`ccpo_lab.tracking.summary`); with a report, one more run of the group (job type
``report``, name ``<sweep>-report``, files in ``<sweep>/_wandb/``) carries the report's
numbers and the sweep's cost as its summary (the group's summary: the same keys as MLflow's
parent run, ``report/<arm>/mean``, ``cost/device_hours``...).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccpo_lab.config.environments import DEFAULT_ENVIRONMENT
from ccpo_lab.config.yamlio import atomic_write_json
from ccpo_lab.errors import UserError
from ccpo_lab.runs.cost import read_cost
from ccpo_lab.runs.family import tracking_group
from ccpo_lab.runs.layout import FoundRun, RunDir, SweepDir
from ccpo_lab.runs.sweep_runs import check_is_sweep, read_sweep_config
from ccpo_lab.runs.wandb_run import (
    WandbIdentity,
    WandbSettings,
    clean,
    identity,
    init_run,
    inspect,
    mapping,
    offline_runs,
    run_config,
    wandb_id,
)
from ccpo_lab.tracking.summary import cost_values, defined, summary_settings, summary_values
from ccpo_lab.tracking.target import wandb_target

if TYPE_CHECKING:
    from ccpo_lab.report.model import ReportModel

REPORT_JOB = "report"
"""Job type of the run holding the report's numbers."""
REPORT_DIR = "_wandb"
"""Folder of the sweep directory holding that run's W&B files and what was sent
(``report.json``); arm names cannot start with '_', so it never collides."""


@dataclass(frozen=True)
class WandbSyncResult:
    """What a W&B sync did."""

    mode: str
    """``online`` or ``offline``."""
    project: str
    """The project."""
    entity: str | None
    """The entity."""
    opened: int
    """Runs opened (created or continued)."""
    up_to_date: int
    """Runs with nothing new (not opened)."""
    rows: int
    """Metrics rows logged."""
    report: bool
    """The report's numbers were logged (the group's summary run)."""
    warnings: tuple[str, ...] = ()
    """Runs left out, and why."""

    def summary(self) -> str:
        """One line for the terminal."""
        where = f"{self.entity + '/' if self.entity else ''}{self.project}"
        return (f"W&B ({self.mode}, project {where}): {self.opened} runs sent, "
                f"{self.up_to_date} up to date, {self.rows} metrics rows logged"
                + ("; the report's numbers in the group's summary run" if self.report else "")
                + ("; upload the offline runs with `wandb sync <run>/wandb/offline-run-*`"
                   if self.mode == "offline" and (self.opened or self.report) else ""))


def _digest(values: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(dict(values), sort_keys=True).encode()).hexdigest()[:16]


def _destination(settings: WandbSettings, ident: WandbIdentity) -> str:
    return f"{settings.mode}:{settings.entity or ''}/{settings.project}/{ident.id}"


def _recorded(rd: RunDir, run: Mapping[str, Any], settings: WandbSettings,
              ident: WandbIdentity) -> tuple[int | None, str | None]:
    """The last step and summary digest this destination got, as ``run.json`` says."""
    entry = mapping(run.get("wandb"))
    same = (entry.get("id") == ident.id and entry.get("project") == settings.project
            and entry.get("mode") == settings.mode
            and (entry.get("entity") or None) == settings.entity)
    if not same:
        return None, None
    last = entry.get("last_step")
    return (int(last) if isinstance(last, int) else None), entry.get("summary_digest")


def _offline_last_step(rd: RunDir, wid: str) -> int:
    """The last history step over the run's offline directories (-1: none)."""
    last = -1
    for d in offline_runs(rd, wid):
        try:
            step = inspect(d, summary=True).get("step")
        except (RuntimeError, ValueError):
            continue  # an unreadable directory (cut off): its rows are sent again
        if isinstance(step, int):
            last = max(last, step)
    return last


def _rows_after(rd: RunDir, after: int) -> tuple[list[tuple[int, dict[str, float]]], int]:
    """Rows of the metrics file after step ``after``, and its last step (-1: none)."""
    from ccpo_lab.runs.metrics import MetricsScan

    rows, last = [], -1
    for row in MetricsScan(rd.metrics, keep=0, root=rd.sweep_root):
        last = max(last, row.step)
        if row.step > after:
            rows.append((row.step, clean(row.data)))
    return rows, last


def wandb_config(rd: RunDir, run: Mapping[str, Any]) -> dict[str, Any]:
    """A run's W&B config: :func:`~ccpo_lab.runs.wandb_run.run_config` and
    ``environment_name``, the run's environment (``alfworld`` for a run written before
    environments), a flat key to filter and group W&B's runs table by (the group is
    ``<sweep>/<environment>`` for one environment of a sweep over several)."""
    return {**run_config(rd, run),
            "environment_name": str(run.get("environment") or DEFAULT_ENVIRONMENT)}


def _sync_run(f: FoundRun, settings: WandbSettings, summary: Mapping[str, float]
              ) -> tuple[bool, int]:
    """Bring one run's W&B run up to date; ``(opened, rows logged)``."""
    rd = RunDir(f.path)
    run = rd.read_run()
    ident = identity(rd, run)
    recorded, digest = _recorded(rd, run, settings, ident)
    _, last = _rows_after(rd, MAX_ANY)
    if recorded is not None and recorded >= last and digest == _digest(summary):
        return False, 0
    after = _offline_last_step(rd, ident.id) if settings.mode == "offline" else -1
    wb = init_run(rd, settings, ident, wandb_config(rd, run))
    try:
        if settings.mode == "online":
            after = int(getattr(wb, "starting_step", 0) or 0) - 1
        rows, last = _rows_after(rd, after)
        for step, data in rows:
            wb.log(data, step=step)
        wb.summary.update(dict(summary))
    finally:
        wb.finish()
    _note(rd, settings, ident, last_step=max(last, after), summary_digest=_digest(summary))
    return True, len(rows)


MAX_ANY = 2**31
"""A step after every row (:func:`_rows_after` then returns none, only the last step)."""


def _note(rd: RunDir, settings: WandbSettings, ident: WandbIdentity, **fields: Any) -> None:
    entry = rd.read_run().get("wandb")
    base = dict(entry) if isinstance(entry, Mapping) else {}
    base.update({"id": ident.id, "project": settings.project, "entity": settings.entity,
                 "mode": settings.mode, "group": ident.group, "job_type": ident.job_type,
                 "name": ident.name, "dir": "wandb", **fields})
    rd.update_run(wandb=base)


def _sync_report(root: Path, manifest: Mapping[str, Any], sweep: str,
                 settings: WandbSettings, report: ReportModel) -> bool:
    """The group's summary run: the report's numbers; False when they were sent already."""
    from ccpo_lab.tracking.mlflow_sync import headline_metrics

    values = {**headline_metrics(report), **defined(_sweep_cost(root))}
    holder = RunDir(root / REPORT_DIR)  # its W&B files (it has no run directory)
    record = holder.path / "report.json"
    group = tracking_group(sweep, root)
    ident = WandbIdentity(id=wandb_id(hashlib.sha256(f"report {group}".encode()).hexdigest(),
                                      sweep, REPORT_JOB, str(manifest.get("created") or "")),
                          name=f"{group.replace('/', '-')}-report", group=group,
                          job_type=REPORT_JOB)
    dest = _destination(settings, ident)
    try:
        seen = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        seen = {}
    if isinstance(seen, dict) and seen.get(dest) == _digest(values):
        return False
    holder.path.mkdir(parents=True, exist_ok=True)
    wb = init_run(holder, settings, ident, {"sweep": sweep, "report": {
        "metric": report.metric, "window_start": report.window_start,
        "reference": report.reference, "confidence": report.confidence}})
    try:
        wb.summary.update(values)
    finally:
        wb.finish()

    atomic_write_json(record, {**(seen if isinstance(seen, dict) else {}),
                               dest: _digest(values)})
    return True


def _sweep_cost(root: Path) -> dict[str, Any]:
    """``cost/*`` of the whole sweep (device-hours by arm and in total)."""
    from ccpo_lab.report.cost import sweep_cost_values

    return sweep_cost_values(root)


def sync_wandb(sweep_dir: str | Path, *, mode: str | None = None, project: str | None = None,
               entity: str | None = None, report: ReportModel | None = None,
               say: Callable[[str], None] | None = None) -> WandbSyncResult:
    """Push every run of a sweep directory (and ``report``'s numbers) to W&B.

    Settings: each argument > ``WANDB_MODE``/``WANDB_PROJECT``/``WANDB_ENTITY`` > the
    sweep's ``tracking.wandb`` > ``online`` mode, the project named after the sweep
    (:func:`~ccpo_lab.tracking.target.wandb_target`; ``say`` gets a line when an
    environment variable decided).

    Raises:
        UserError: not a sweep directory, the ``wandb`` package is missing, or the mode is
            neither ``online`` nor ``offline`` (``WANDB_MODE=disabled``).
    W&B's own errors propagate.
    """
    from ccpo_lab.config.tracking import wandb_installed

    root = check_is_sweep(sweep_dir).resolve()
    if not wandb_installed():
        raise UserError("the wandb package is not installed (pip install 'ccpo-lab[wandb]')",
                        key="--wandb")
    manifest = read_sweep_config(root)
    sweep = str(manifest.get("name") or root.name)
    target = wandb_target(manifest, sweep, mode, project, entity)
    settings = target.settings
    if say is not None:
        for note in target.notes:
            say(note)
    runs, left_out = SweepDir(root).discover()
    arms = sorted({f.arm for f in runs})
    stats = summary_settings(manifest, [a for a in manifest.get("arms") or [] if a in arms]
                             or arms)
    opened = fresh = rows = 0

    for f in runs:
        values = cost_values(read_cost(RunDir(f.path)))
        if stats is not None:
            values.update(summary_values(f, stats))
        did, n = _sync_run(f, settings, values)
        opened += did
        fresh += not did
        rows += n
        if did and say is not None:
            say(f"W&B: {f.arm} seed {f.seed}: {n} rows logged")
    logged = report is not None and _sync_report(root, manifest, sweep, settings, report)
    return WandbSyncResult(settings.mode, settings.project, settings.entity, opened, fresh,
                           rows, bool(logged),
                           tuple(f"{x.text}; not synced to W&B" for x in left_out))
