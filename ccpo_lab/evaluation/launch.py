"""``ccpo-lab evaluate``: plan, write the jobs, submit them through the sweep's launcher, wait.

The launcher is the sweep's own (``sweep.json``'s ``launcher`` section; ``--launcher``
picks another kind with its default settings), given what a run of the sweep needs: an
evaluation job runs where and as a run of its sweep runs (the run's interpreter, its GPUs,
its CPUs). Each job is a directory the launcher submits like a run directory
(:class:`~ccpo_lab.runs.evals.EvalJobDir`): inline jobs execute here, local ones in a
detached pool, Slurm ones as one job array (requeued on timeout or preemption, resuming
at the next unfinished repeat). Relaunching is idempotent: finished evaluations are never
redone, evaluations a live job computes are left to it, an interrupted job resumes, a
failed one waits for ``--retry-failed``. With ``--wait``, the jobs of another launch that
compute an evaluation asked for (two ``evaluate`` at once) are waited for like this
launch's own, so both end complete.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ccpo_lab.backends.eval_contract import eval_backend
from ccpo_lab.config.backends import needs
from ccpo_lab.config.yamlio import atomic_write_json
from ccpo_lab.errors import UserError
from ccpo_lab.evaluation.plan import (
    JobPlan,
    RunEvals,
    decide,
    live_jobs,
    plan_evaluations,
    request_document,
)
from ccpo_lab.evaluation.reference import write_reference_dir
from ccpo_lab.evaluation.spec import EvalRequest
from ccpo_lab.evaluation.track import print_eval_status
from ccpo_lab.launch.base import Launcher, Submission, parallel
from ccpo_lab.launch.display import StatusMonitor, make_console
from ccpo_lab.launch.registry import build_settings, make_launcher
from ccpo_lab.runs.evals import EvalJobDir, eval_path
from ccpo_lab.runs.execute import Stopped
from ccpo_lab.runs.layout import SweepDir
from ccpo_lab.runs.owner import RunBusy, acquire
from ccpo_lab.runs.references import Reference


def eval_launcher(sweep_dir: Path, plans: Sequence[RunEvals], kind: str | None = None
                  ) -> Launcher:
    """The launcher of the sweep (``sweep.json``), or of ``kind`` with its defaults, for
    jobs that need what a run of the sweep needs."""
    sd = SweepDir(sweep_dir)
    manifest = sd.read_manifest()
    where = lambda _k: str(sd.manifest)  # noqa: E731
    recorded = manifest.get("launcher")
    settings_doc: dict[str, Any] = dict(recorded) if isinstance(recorded, dict) \
        else {"kind": "inline"}
    if kind is not None and kind != settings_doc.get("kind"):
        settings_doc = {"kind": kind}
    settings = build_settings(settings_doc, where=lambda k: where(k) if kind is None
                              else "--launcher")
    found = {needs(p.run) for p in plans}
    if len(found) > 1:
        raise UserError("the runs to evaluate need different resources; evaluate them "
                        "separately (--arm, --seed)", file=sweep_dir)
    name = str(manifest.get("sweep") or sd.path.name)
    launcher = make_launcher(settings, sd.path, name=f"{name}-eval", needs=next(iter(found)))
    launcher.check()
    return launcher


def _write_jobs(jobs: Sequence[JobPlan], console: Any) -> list[EvalJobDir]:
    """Write each job's ``request.json`` and mark it pending (under its lock: a job that a
    process started executing since the decision is left to it); the jobs to submit."""
    def write(p: JobPlan) -> EvalJobDir | None:
        job = p.job
        assert job is not None
        job.path.mkdir(parents=True, exist_ok=True)
        try:
            with acquire(job):
                if not job.request_json.is_file():
                    atomic_write_json(job.request_json, request_document(p))
                total = sum(t.setting.episodes * t.setting.repeats for t in p.to_run)
                job.write_state("pending", step=0, total_steps=total, error=None,
                                traceback=None, exit=None)
        except RunBusy as e:
            console.print(f"  {p.evals.name}: job {job.job_id} left to {e.owner.describe()}, "
                          "which started executing it", highlight=False, markup=False)
            return None
        return job

    return [j for j in parallel(write, [p for p in jobs if p.submit]) if j is not None]


def plan_lines(plans: Sequence[JobPlan], launcher: Launcher, dry_run: bool) -> list[str]:
    """What a launch does, per run and evaluation, and the command of the first job."""
    out = []
    shown = False
    for p in plans:
        labels = p.evals.labels
        out.append(f"{p.evals.name} ({p.evals.rd.path}):")
        for d in p.decisions:
            what = "/".join(labels.get(d.target.step, (f"step {d.target.step}",)))
            text = {"done": "done (its file exists)", "busy": d.reason, "bad": d.reason,
                    "run": f"evaluate (job {p.job.job_id if p.job else '-'}: {p.job_action})"
                    }[d.action]
            out.append(f"  {d.target.key} [{what}]: {text}")
        if p.job is not None and p.job_action == "skip":
            out.append(f"  job {p.job.job_id}: {p.job_reason}")
        if dry_run and p.submit and not shown and p.job is not None \
                and p.evals.reference is None:
            backend = eval_backend(p.evals.run.backend.kind)
            for t in p.to_run[:1]:
                out.append("  " + str(backend.describe(p.evals.run, p.evals.rd, t, p.job)))
            shown = True
    n_jobs = sum(p.submit for p in plans)
    out.append(f"{n_jobs} evaluation job(s) to submit; launcher {launcher.kind}: "
               f"{launcher.resources()}" + (" (dry run, nothing written)" if dry_run else ""))
    return out


def launch_evaluations(sweep_dir: str | Path, request: EvalRequest, *, wait: bool = False,
                       dry_run: bool = False, retry_failed: bool = False,
                       launcher_kind: str | None = None, console: Any = None,
                       references: Sequence[Reference] = ()) -> int:
    """Plan, write and submit the evaluation jobs (the runs', then the ``references``'); the
    exit code (with ``wait``, or jobs executed here: 0 when every evaluation is done)."""
    console = console or make_console()
    root = Path(sweep_dir)
    runs, notes, refs = plan_evaluations(root, request, references)
    launcher = eval_launcher(root, runs, launcher_kind)
    plans = decide(root, runs, retry_failed=retry_failed)
    say = lambda text: console.print(text, highlight=False, markup=False,  # noqa: E731
                                     soft_wrap=True)
    for line in [f"note: {n}" for n in notes] + plan_lines(plans, launcher, dry_run):
        say(line)
    if dry_run:
        return 0
    list(map(write_reference_dir, refs))
    if any(p.submit for p in plans):
        launcher.prepare()
    jobs = _write_jobs(plans, console)
    busy = list({d.busy.path: d.busy for p in plans for d in p.decisions
                 if d.busy is not None}.values())
    watched = [*jobs, *[b for b in busy if b.path not in {j.path for j in jobs}]]
    if jobs:
        sub = launcher.submit(jobs, wait=wait)
        SweepDir(root).add_submission(launcher=launcher.kind, runs=len(jobs),
                                      job_ids=list(sub.job_ids), evaluation=True,
                                      **sub.record)
        if sub.message:
            say(sub.message)
        if sub.detached and not wait:
            say(f"follow: ccpo-lab status {root} --watch; cancel: ccpo-lab cancel {root}")
            return 0
        try:
            launcher.wait(sub, StatusMonitor(root, watched, console, f"evaluations of {root}"))
        except KeyboardInterrupt:
            say("interrupted: " + ("stopped watching; the jobs go on" if sub.detached else
                                   "the current job was recorded cancelled; relaunch the "
                                   "same command to resume"))
            return 130
        except Stopped as e:
            say(f"stopped by signal {e.signum}: relaunch the same command to resume")
            return 128 + e.signum
    elif not wait:
        computing = busy or _computing(root, plans, set())
        if computing:
            say(f"nothing to submit; {len(computing)} job(s) compute the rest (follow: "
                f"ccpo-lab status {root} --watch)")
            return 0
    try:
        if not jobs:
            _watch(root, launcher, busy, console)  # the jobs the decision found computing
        others = _wait_for_others(root, plans, launcher, console, {j.path for j in jobs})
    except KeyboardInterrupt:
        say("interrupted: stopped watching; the other launches' jobs go on")
        return 130
    return _finish(root, plans, list({j.path: j for j in [*watched, *others]}.values()),
                   console)


def _watch(root: Path, launcher: Launcher, jobs: Sequence[EvalJobDir], console: Any) -> None:
    """Wait until nothing more happens to ``jobs`` (other launches'), showing them."""
    if jobs:
        # the base class's wait only watches (an inline launcher's would execute)
        Launcher.wait(launcher, Submission(runs=()),
                      StatusMonitor(root, jobs, console, f"evaluations of {root}"))


def _missing(plans: Sequence[JobPlan]) -> set[tuple[Path, str]]:
    """(Run directory, key) of the evaluations asked for that have no file yet."""
    return {(p.evals.rd.path, d.target.key) for p in plans for d in p.decisions
            if not eval_path(p.evals.rd, d.target.key).is_file()}


def _computing(root: Path, plans: Sequence[JobPlan], waited: set[Path]) -> list[EvalJobDir]:
    """The live jobs, other than ``waited``, that compute a missing evaluation: another
    launch's (its job started between this launch's decision and its write, or holds an
    evaluation this launch's job then left to it)."""
    missing = _missing(plans)
    if not missing:
        return []
    live = live_jobs(root, [p.evals.rd for p in plans])
    found = {j.path: j for k, j in live.items() if k in missing and j.path not in waited}
    return list(found.values())


def _wait_for_others(root: Path, plans: Sequence[JobPlan], launcher: Launcher, console: Any,
                     waited: set[Path]) -> list[EvalJobDir]:
    """Wait, as for this launch's own, for the jobs of other launches that compute what is
    still missing (issue 36, item 10: two ``evaluate --wait`` at once both end complete);
    each job once. Returns those jobs."""
    out: list[EvalJobDir] = []
    while others := _computing(root, plans, waited):
        console.print(f"waiting for {len(others)} evaluation job(s) of another launch, "
                      "which compute the rest", highlight=False, markup=False, soft_wrap=True)
        _watch(root, launcher, others, console)
        waited |= {j.path for j in others}
        out += others
    return out


def _finish(root: Path, plans: Sequence[JobPlan], jobs: Sequence[EvalJobDir], console: Any
            ) -> int:
    """The jobs' status and the exit code: 0 when every evaluation asked for has its file."""
    if jobs:
        print_eval_status(console, root, jobs)
    missing = [(p.evals.name, d.target.key) for p in plans for d in p.decisions
               if not eval_path(p.evals.rd, d.target.key).is_file()]
    done = sum(len(p.decisions) for p in plans) - len(missing)
    console.print(f"{done} of {done + len(missing)} evaluations done"
                  + (f"; missing: {', '.join(f'{n} {k}' for n, k in missing[:4])}"
                     + (" ..." if len(missing) > 4 else "") if missing else "")
                  + (f"; report: ccpo-lab report {root}" if not missing else ""),
                  highlight=False, markup=False, soft_wrap=True)
    return 0 if not missing else 1
