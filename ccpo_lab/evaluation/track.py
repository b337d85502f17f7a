"""The evaluation jobs of a sweep for ``status`` and ``cancel``.

A job is followed like a run (:func:`ccpo_lab.launch.status.collect_status` on its
directory: its ownership lock, ``state.json``, ``job.json`` and its launcher's view), so a
queued, running, requeued, interrupted or failed job shows as such; its step is the
episodes played so far of all its evaluations. ``cancel`` stops them like runs
(:func:`ccpo_lab.launch.cancel.cancel_rows`); a relaunch of the same ``evaluate`` resumes
them at their next unfinished repeat.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ccpo_lab.launch.cancel import cancel_rows
from ccpo_lab.launch.display import print_status
from ccpo_lab.launch.status import RunStatus, collect_status
from ccpo_lab.runs.evals import EvalJobDir, job_dirs
from ccpo_lab.runs.layout import SweepDir
from ccpo_lab.runs.references import reference_dirs

TITLE = "evaluation jobs"


def sweep_jobs(sweep_dir: str | Path) -> list[EvalJobDir]:
    """Every evaluation job of the sweep's run directories and reference policies
    (:mod:`ccpo_lab.runs.references`)."""
    dirs = [*SweepDir(Path(sweep_dir)).run_dirs(), *reference_dirs(sweep_dir)]
    return [j for rd in dirs for j in job_dirs(rd)]


def eval_status(sweep_dir: str | Path, jobs: Sequence[EvalJobDir] | None = None, *,
                scheduler: bool = True) -> list[RunStatus]:
    """Status rows of the sweep's evaluation jobs (or of ``jobs``)."""
    found = list(jobs) if jobs is not None else sweep_jobs(sweep_dir)
    return collect_status(sweep_dir, found, scheduler=scheduler) if found else []


def status_records(rows: Sequence[RunStatus]) -> list[dict[str, Any]]:
    """What ``status --json`` adds per job: the job id and its evaluations' keys."""
    out = []
    for r in rows:
        job = EvalJobDir(Path(r.path))
        out.append({"job": job.job_id, "keys": list(job.read_request().get("keys", []))})
    return out


def print_eval_status(console: Any, sweep_dir: str | Path,
                      jobs: Sequence[EvalJobDir] | None = None) -> list[RunStatus]:
    """Print the jobs' table and failure details (nothing when there is no job)."""
    rows = eval_status(sweep_dir, jobs)
    if rows:
        print_status(console, rows, f"{TITLE} of {Path(sweep_dir).name} (step: episodes "
                     "played)")
    return rows


def cancel_evaluations(sweep_dir: str | Path, *, arm: str | None = None,
                       seed: int | None = None, grace_s: float = 10.0
                       ) -> tuple[list[Any], list[str]]:
    """Cancel the unfinished evaluation jobs of the selected runs: (cancelled, problems)."""
    rows = [r for r in eval_status(sweep_dir) if not r.terminal
            and (arm is None or r.arm == arm) and (seed is None or r.seed == seed)]
    return cancel_rows(rows, grace_s) if rows else ([], [])
