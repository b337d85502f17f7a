"""From a request and a sweep directory to the evaluations each run needs. Writes nothing.

:func:`plan_evaluations` reads the sweep's runs (the newest directory of each (arm, seed),
as the report reads them), selects those of ``--arm`` / ``--seed``, resolves each one's
checkpoints and settings through its backend, and refuses, before anything is written,
what cannot be evaluated: a checkpoint that does not exist, a run that is not finished
(``--checkpoint final``), a split the backend lacks, a number of games out of range (one
line naming the run and the value). :func:`decide` then says, per evaluation, whether it
is done (its file exists), being computed (a live job holds it) or to be computed, and
groups the latter into one job per run (:class:`JobPlan`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccpo_lab.backends.eval_contract import Checkpoints, eval_backend
from ccpo_lab.config.schema import RunConfig
from ccpo_lab.errors import UserError
from ccpo_lab.evaluation.reference import ReferenceRun, check_reference_dir, reference_runs
from ccpo_lab.evaluation.spec import EvalRequest, EvalSetting, EvalTarget, canonical, target_json
from ccpo_lab.launch.status import collect_status
from ccpo_lab.runs.evals import EvalJobDir, eval_path, job_dir, job_dirs, read_eval_file
from ccpo_lab.runs.layout import RunDir, load_run_config
from ccpo_lab.runs.provenance import now_iso
from ccpo_lab.runs.references import Reference
from ccpo_lab.runs.sweep_runs import load_sweep_runs


@dataclass(frozen=True)
class RunEvals:
    """The evaluations one run needs."""

    run: RunConfig
    """Its configuration."""
    rd: RunDir
    """Its directory."""
    targets: tuple[EvalTarget, ...]
    """Evaluations, in request order (checkpoint by checkpoint, split by split)."""
    labels: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Step -> what it is for this run (``final``, ``best``, ``step 30``)."""
    reference: str | None = None
    """The reference's label when ``rd`` holds a reference policy, not a run."""

    @property
    def name(self) -> str:
        """``grpo seed 0``; ``reference base seed 0``."""
        who = self.run.arm if self.reference is None else f"reference {self.reference}"
        return f"{who} seed {self.run.seed}"


@dataclass(frozen=True)
class TargetDecision:
    """What a launch does with one evaluation."""

    target: EvalTarget
    """The evaluation."""
    action: str
    """``done`` (its file exists), ``busy`` (a live job computes it), ``bad`` (its file is
    not usable: left alone) or ``run`` (to compute)."""
    reason: str = ""
    """Why (the busy job, the file's problem)."""
    busy: EvalJobDir | None = None
    """With ``busy``: the job computing it."""


@dataclass(frozen=True)
class JobPlan:
    """One run's evaluations and the job that computes those not done."""

    evals: RunEvals
    """The run and what it needs."""
    decisions: tuple[TargetDecision, ...]
    """One per target."""
    job: EvalJobDir | None
    """The job of the targets to compute (None: nothing to compute)."""
    job_action: str = ""
    """``new``, ``resume`` (the job exists, unfinished), ``retry`` (it failed; with
    ``retry_failed``) or ``skip`` (it failed, without ``retry_failed``)."""
    job_reason: str = ""
    """Why (the job's state)."""

    @property
    def to_run(self) -> tuple[EvalTarget, ...]:
        """The targets the job computes."""
        return tuple(d.target for d in self.decisions if d.action == "run")

    @property
    def submit(self) -> bool:
        """Whether the job is submitted."""
        return self.job is not None and self.job_action in ("new", "resume", "retry")


def _runs(sweep_dir: Path, arm: str | None, seed: int | None
          ) -> tuple[list[tuple[RunConfig, RunDir]], list[str]]:
    """The selected runs (newest directory of each (arm, seed)) and notes on those left
    out; :class:`UserError` for an unknown arm or seed."""
    found = load_sweep_runs(sweep_dir)
    keys = sorted(found.newest, key=lambda k: (found.arms.index(k[0]), k[1]))
    if arm is not None and arm not in {a for a, _ in keys}:
        raise UserError("no such arm in this sweep", key="--arm", value=arm,
                        valid=sorted({a for a, _ in keys}))
    if seed is not None and seed not in {s for _, s in keys}:
        raise UserError("no such seed in this sweep", key="--seed", value=seed,
                        valid=sorted({s for _, s in keys}))
    out = []
    for a, s in keys:
        if (arm is not None and a != arm) or (seed is not None and s != seed):
            continue
        rd = RunDir(found.newest[(a, s)].path)
        if not rd.config_yaml.is_file():
            raise UserError(f"{a} seed {s}: the run has no configuration (an imported run?): "
                            "it cannot be evaluated", file=rd.path)
        try:
            run = load_run_config(rd)
        except UserError:
            raise
        except Exception as e:  # noqa: BLE001 - a config.yaml this version cannot read
            raise UserError(f"{a} seed {s}: config.yaml unreadable ({type(e).__name__}: "
                            f"{e})", file=rd.config_yaml) from None
        out.append((run, rd))
    return out, [x.text for x in found.left_out]


def _steps(selector: str | int, cps: Checkpoints, who: str, rd: RunDir) -> list[int]:
    """The checkpoint steps ``selector`` names for one run; :class:`UserError` otherwise."""
    have = sorted(cps.steps)
    valid = ", ".join(map(str, have)) or "none"
    if selector == "final":
        if cps.final is None:
            raise UserError(f"{who}: no final checkpoint: {cps.final_why}", file=rd.path,
                            key="--checkpoint", value="final")
        return [cps.final]
    if selector == "best":
        if cps.best is None:
            raise UserError(f"{who}: no best checkpoint: {cps.best_why}", file=rd.path,
                            key="--checkpoint", value="best")
        return [cps.best]
    if selector == "all":
        if not have:
            raise UserError(f"{who}: the run has no checkpoint yet", file=rd.path,
                            key="--checkpoint", value="all")
        return have
    assert isinstance(selector, int)
    if selector not in cps.steps:
        raise UserError(f"{who}: no checkpoint at this step", file=rd.path,
                        key="--checkpoint", value=selector, valid=f"steps {valid}")
    return [selector]


def labels_of(cps: Checkpoints) -> dict[int, tuple[str, ...]]:
    """Step -> ``final`` / ``best`` / ``step S``, for the run's checkpoints."""
    out: dict[int, tuple[str, ...]] = {}
    for s in cps.steps:
        names = [n for n, v in (("final", cps.final), ("best", cps.best)) if v == s]
        out[s] = tuple(names) or (f"step {s}",)
    return out


def run_targets(run: RunConfig, rd: RunDir, request: EvalRequest) -> RunEvals:
    """The evaluations ``request`` asks of one run (checked against its backend)."""
    backend = eval_backend(run.backend.kind)
    who = f"{run.arm} seed {run.seed}"
    cps: Checkpoints = backend.checkpoints(run, rd)
    steps = _steps(request.checkpoint, cps, who, rd)
    settings = _settings(run, rd, request, backend, who)
    draws = {s: backend.draw(run, rd, s) for s in settings}
    targets = tuple(EvalTarget(step, s, draws[s]) for step in steps for s in settings)
    return RunEvals(run, rd, targets, labels_of(cps))


def reference_targets(r: ReferenceRun, request: EvalRequest) -> RunEvals:
    """The evaluations of a reference on one seed: the settings ``request`` asks of the
    seed's runs, on their draws (the policy's "step" is 0: it has one)."""
    backend = eval_backend(r.run.backend.kind)
    who = f"reference {r.reference.label} seed {r.run.seed}"
    settings = _settings(r.run, r.source, request, backend, who)
    draws = {s: backend.draw(r.run, r.source, s) for s in settings}
    targets = tuple(EvalTarget(0, s, draws[s]) for s in settings)
    return RunEvals(r.run, r.rd, targets, {0: ("reference",)}, r.reference.label)


def _settings(run: RunConfig, rd: RunDir, request: EvalRequest, backend: Any, who: str
              ) -> list[EvalSetting]:
    """The settings (split, games, repeats, temperature) ``request`` asks of a run."""
    temp = request.temperature if request.temperature is not None \
        else float(run.protocol.val_temperature)
    settings = []
    for split in request.splits:
        rng = backend.episodes(run, split)
        n = request.episodes if request.episodes is not None else rng.default
        if not rng.low <= n <= rng.high:
            raise UserError(f"{who}: {n} games is out of range for split {split!r}"
                            + (f" ({rng.what})" if rng.what else ""), file=rd.path,
                            key="--episodes", value=n, valid=f"{rng.low}..{rng.high}")
        settings.append(EvalSetting(split, n, request.repeats, temp))
    return settings


def plan_evaluations(sweep_dir: str | Path, request: EvalRequest,
                     references: Sequence[Reference] = ()
                     ) -> tuple[list[RunEvals], list[str], list[ReferenceRun]]:
    """Every selected run's evaluations, then each reference's on the selected runs' seeds
    (nothing written), notes on directories left out, and the reference directories to
    write; :class:`UserError` naming the run and the value for anything that cannot be
    evaluated."""
    runs, notes = _runs(Path(sweep_dir), request.arm, request.seed)
    if not runs:
        raise UserError("no runs to evaluate", file=sweep_dir)
    plans = [run_targets(run, rd, request) for run, rd in runs]
    refs = reference_runs(Path(sweep_dir), references, runs)
    for r in refs:
        check_reference_dir(r)
    return plans + [reference_targets(r, request) for r in refs], notes, refs


def job_id(targets: Sequence[EvalTarget]) -> str:
    """A job's id: a digest of the keys it computes (the same request gets the same job,
    which then resumes)."""
    return hashlib.sha256(canonical(sorted(t.key for t in targets)).encode()).hexdigest()[:12]


def live_jobs(sweep_dir: Path, rds: Sequence[RunDir]) -> dict[tuple[Path, str], EvalJobDir]:
    """(Run directory, key) -> a live job (queued or executing) that computes it. A key
    names an evaluation within its run (every run of one request has the same keys)."""
    jobs = [j for rd in rds for j in job_dirs(rd)]
    if not jobs:
        return {}
    rows = {r.path: r for r in collect_status(sweep_dir, jobs)}
    out: dict[tuple[Path, str], EvalJobDir] = {}
    for j in jobs:
        r = rows.get(j.path)
        if r is not None and (r.live or r.owner is not None) and not r.terminal:
            for key in j.read_request().get("keys", []):
                out.setdefault((j.run_dir.path, str(key)), j)
    return out


def decide(sweep_dir: str | Path, plans: Sequence[RunEvals], *, retry_failed: bool = False
           ) -> list[JobPlan]:
    """Per run: each evaluation done, busy, bad or to run, and the job of those to run."""
    live = live_jobs(Path(sweep_dir), [p.rd for p in plans])
    out = []
    for p in plans:
        decisions = []
        for t in dict.fromkeys(p.targets):
            path = eval_path(p.rd, t.key)
            if path.is_file():
                try:
                    read_eval_file(path)
                    decisions.append(TargetDecision(t, "done", "evaluated"))
                except (OSError, ValueError) as e:
                    decisions.append(TargetDecision(t, "bad", f"{e}; move the file away "
                                                    "to evaluate again"))
            elif (busy := live.get((p.rd.path, t.key))) is not None:
                decisions.append(TargetDecision(t, "busy", f"being evaluated by job "
                                                f"{busy.job_id}", busy))
            else:
                decisions.append(TargetDecision(t, "run"))
        todo = [d.target for d in decisions if d.action == "run"]
        if not todo:
            out.append(JobPlan(p, tuple(decisions), None))
            continue
        job = job_dir(p.rd, job_id(todo))
        action, reason = _job_action(job, retry_failed)
        out.append(JobPlan(p, tuple(decisions), job, action, reason))
    return out


def _job_action(job: EvalJobDir, retry_failed: bool) -> tuple[str, str]:
    if not job.request_json.is_file():
        return "new", "new"
    state = str(job.read_state().get("state", "pending"))
    if state == "failed":
        error = str(job.read_state().get("error") or "").splitlines()[:1]
        why = "failed" + (f" ({error[0]})" if error else "")
        return ("retry", f"{why}, --retry-failed") if retry_failed else \
            ("skip", f"{why} (resubmit with --retry-failed)")
    return "resume", f"{state}: its finished repeats are kept"


def request_document(p: JobPlan) -> dict[str, Any]:
    """``request.json`` of a job: the run, and per target its key, step, setting, draw."""
    return {"run_id": p.evals.run.run_id, "arm": p.evals.run.arm, "seed": p.evals.run.seed,
            **({"reference": p.evals.reference} if p.evals.reference is not None else {}),
            "created": now_iso(), "keys": [t.key for t in p.to_run],
            "targets": [target_json(t) for t in p.to_run]}
