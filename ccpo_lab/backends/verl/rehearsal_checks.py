"""What a rehearsal checks, one :class:`Check` each, from the files its runs wrote.

Each check reads the run directories (and, for the weights, asks the trainer environment
to load and generate), never the rehearsal's own bookkeeping, and names on failure what
failed and where to look (a file, a log line). ``ccpo-lab rehearse`` exits 0 only when all
pass; the end-to-end test asserts the same facts independently.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.runs.cost import MEASURED_PREFIXES

REQUIRED = ("actor/grad_norm", "actor/pg_loss", "critic/advantages/max",
            "critic/advantages/min", "episode/valid_action_ratio")
"""Metrics every training step must log (a non-finite value is never logged, so a missing
one may also be a NaN)."""
RESUME_TOL = 1e-6
"""Largest difference allowed between a resumed run's metrics and an uninterrupted one's."""


@dataclass(frozen=True)
class Check:
    """One rehearsal check's outcome."""

    name: str
    """Short name (``trainer``, ``metrics``, ...)."""
    ok: bool
    """Whether it passed."""
    detail: str
    """What was found (on failure: what failed)."""
    where: str = ""
    """Where to look (a file, a log line); empty when it passed."""

    def line(self) -> str:
        """``PASS  name  detail`` / ``FAIL  name  detail (see where)``."""
        tail = f" (see {self.where})" if self.where and not self.ok else ""
        return f"{'PASS' if self.ok else 'FAIL'}  {self.name:<11} {self.detail}{tail}"


@dataclass(frozen=True)
class RunView:
    """One run directory of the rehearsal, as the checks read it."""

    arm: str
    seed: int
    path: Path
    state: dict[str, Any]
    run: dict[str, Any]
    rows: list[dict[str, Any]]

    @property
    def label(self) -> str:
        """``<arm> seed <k>``."""
        return f"{self.arm} seed {self.seed}"

    def step_rows(self) -> dict[int, dict[str, Any]]:
        """Step -> the logged metrics of that step."""
        return {int(r["step"]): dict(r["data"]) for r in self.rows}


def load_runs(sweep_dir: Path) -> list[RunView]:
    """Every ``<arm>/seed-<k>`` run of ``sweep_dir`` (sorted), read leniently (a file that
    cannot be read reads empty: the checks then say so)."""
    from ccpo_lab.runs.metrics import MetricsFormatError, read_metrics

    out = []
    for d in sorted(sweep_dir.glob("*/seed-*")):
        if not (d / "run.json").is_file():
            continue
        try:
            rows = read_metrics(d / "metrics.jsonl")
        except MetricsFormatError:
            rows = []
        out.append(RunView(arm=d.parent.name, seed=int(d.name.split("-", 1)[1]), path=d,
                           state=_json(d / "state.json"), run=_json(d / "run.json"),
                           rows=rows))
    return out


def _json(path: Path) -> dict[str, Any]:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def _log_tail(run: RunView) -> str:
    log = run.path / "logs" / "trainer.log"
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return str(log)
    return f"{log}: {lines[-1][:160]}" if lines else str(log)


# ----------------------------------------------------------------------------- checks
def check_trainer(runs: Sequence[RunView], arms: Sequence[str], seeds: Sequence[int]) -> Check:
    """The trainer started and finished every run (state ``completed``, the trainer's
    command and log recorded)."""
    want = {(a, k) for a in arms for k in seeds}
    have = {(r.arm, r.seed): r for r in runs}
    missing = sorted(want - set(have))
    if missing:
        a, k = missing[0]
        return Check("trainer", False, f"{len(missing)} run(s) never started; first: {a} "
                     f"seed {k}", where=f"<sweep>/{a}/seed-{k}")
    for r in (have[w] for w in sorted(want)):
        if r.state.get("state") != "completed":
            return Check("trainer", False, f"{r.label} is {r.state.get('state', 'unknown')}: "
                         f"{str(r.state.get('error') or '')[:200]}", where=_log_tail(r))
        if not (r.path / "logs" / "trainer.log").is_file() or "trainer" not in r.run:
            return Check("trainer", False, f"{r.label}: no trainer command or log recorded",
                         where=str(r.path / "run.json"))
    return Check("trainer", True, f"{len(want)} runs started and finished ({len(arms)} arms x "
                 f"{len(seeds)} seeds, verl-agent's trainer exited 0)")


def check_metrics(runs: Sequence[RunView], steps: int) -> Check:
    """``metrics.jsonl`` has every step 1..``steps`` with the training metrics, finite, and a
    non-zero ``actor/grad_norm``; step 0 has the evaluation before training."""
    for r in runs:
        by_step = r.step_rows()
        where = str(r.path / "metrics.jsonl")
        if "val/success_rate" not in by_step.get(0, {}):
            return Check("metrics", False, f"{r.label}: no evaluation at step 0", where=where)
        for t in range(1, steps + 1):
            row = by_step.get(t)
            if row is None:
                return Check("metrics", False, f"{r.label}: step {t} missing", where=where)
            lost = [k for k in REQUIRED if k not in row]
            if lost:
                return Check("metrics", False, f"{r.label} step {t}: {', '.join(lost)} not "
                             "logged (absent, or not a finite number)", where=where)
            bad = [k for k, v in row.items() if not isinstance(v, int | float) or
                   not math.isfinite(float(v))]
            if bad:
                return Check("metrics", False, f"{r.label} step {t}: not finite: {bad[:3]}",
                             where=where)
            if float(row["actor/grad_norm"]) == 0.0:
                return Check("metrics", False, f"{r.label} step {t}: actor/grad_norm is 0 (no "
                             "gradient reached the weights)", where=where)
    norms = [float(r.step_rows()[t]["actor/grad_norm"]) for r in runs
             for t in range(1, steps + 1)]
    return Check("metrics", True, f"{len(runs)} runs x {steps} steps logged, all finite; "
                 f"actor/grad_norm {min(norms):.3g}..{max(norms):.3g}")


def _adv_summary(row: Mapping[str, Any]) -> tuple[float, float, float]:
    return (float(row.get("critic/advantages/mean", 0.0)),
            float(row.get("critic/advantages/max", 0.0)),
            float(row.get("critic/advantages/min", 0.0)))


def check_advantages(runs: Sequence[RunView], estimators: Mapping[str, Any]) -> Check:
    """Advantages are non-zero in every arm, and at step 1 (identical rollouts) arms with
    different estimators computed different advantages.

    ``estimators``: arm -> its resolved estimator (name and parameters).
    """
    for r in runs:
        rows = [row for t, row in sorted(r.step_rows().items()) if t >= 1]
        if not any(max(abs(v) for v in _adv_summary(row)[1:]) > 0 for row in rows):
            return Check("advantages", False, f"{r.label}: every advantage is 0 (no valid/"
                         "invalid or success/failure mix in any group)",
                         where=str(r.path / "metrics.jsonl"))
    by_seed: dict[int, dict[str, RunView]] = {}
    for r in runs:
        by_seed.setdefault(r.seed, {})[r.arm] = r
    gap = 0.0               # the largest step-1 difference of a summary between two arms
    for seed, arms in sorted(by_seed.items()):
        names = sorted(arms)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if estimators.get(a) == estimators.get(b):
                    continue
                sa = _adv_summary(arms[a].step_rows().get(1, {}))
                sb = _adv_summary(arms[b].step_rows().get(1, {}))
                if sa == sb:
                    return Check("advantages", False, f"seed {seed}: {a} and {b} have "
                                 "different estimators but identical step-1 advantages "
                                 f"(mean, max, min = {sa}): is the estimator routed?",
                                 where=str(arms[b].path / "logs" / "trainer.log"))
                gap = max(gap, *(abs(x - y) for x, y in zip(sa, sb, strict=True)))
    mean_abs: dict[str, list[float]] = {}
    for r in runs:
        vals = [float(row[k]) for row in r.step_rows().values()
                for k in ("adv/adv_ep_absmean",) if k in row]
        mean_abs.setdefault(r.arm, []).extend(vals)
    parts = ", ".join(f"{a} {sum(v) / len(v):.3f}" for a, v in mean_abs.items() if v)
    return Check("advantages", True, "non-zero in every arm; arms differ at step 1 (by "
                 f"up to {gap:.3g} in mean/max/min advantage); mean |episode advantage|: "
                 f"{parts or 'n/a'}")


def check_verify(sweep_dir: Path, runs: Sequence[RunView]) -> Check:
    """``verify``: step-1 rollouts identical across the arms of each seed, groups not
    collapsed, and the seeds' game streams disjoint (the seeds verl-agent derives for its
    environment workers, and the games actually drawn)."""
    from ccpo_lab.runs.rollouts import read_rollouts
    from ccpo_lab.runs.verify import format_checks, verify_sweep

    checks = verify_sweep(sweep_dir)
    bad = [c for c in checks if not c.ok or c.collapsed]
    if bad:
        text = " | ".join(ln.strip() for ln in format_checks(bad)[:3])
        return Check("verify", False, f"seed {bad[0].seed}: {text}", where=f"ccpo-lab verify "
                     f"{sweep_dir}")
    streams: dict[int, set[int]] = {}
    games: dict[int, list[str]] = {}
    for r in runs:
        env = ((r.run.get("determinism") or {}).get("seeding") or {}).get("env_seed") or {}
        ids: set[int] = set()
        for key in ("train_streams", "val_streams"):
            lo, hi = env.get(key) or (0, -1)
            ids |= set(range(int(lo), int(hi) + 1))
        streams.setdefault(r.seed, set()).update(ids)
        if r.seed not in games:
            firsts = []
            for step in (1, 2):
                for ep in read_rollouts(r.path / "rollouts", step):
                    if ep.get("rollout") == 0 and ep.get("turns"):
                        firsts.append(str(ep["turns"][0].get("obs")))
            games[r.seed] = firsts
    seeds = sorted(streams)
    for i, a in enumerate(seeds):
        for b in seeds[i + 1:]:
            common = streams[a] & streams[b]
            if common:
                return Check("verify", False, f"seeds {a} and {b} share environment stream "
                             f"seeds {sorted(common)[:5]}", where="run.json determinism.seeding")
            if games[a] and games[a] == games[b]:
                return Check("verify", False, f"seeds {a} and {b} drew the same games at "
                             "steps 1-2", where="rollouts/step-00000{1,2}.jsonl")
    groups = sum(c.groups or 0 for c in checks)
    distinct = sum(c.distinct_groups or 0 for c in checks)
    return Check("verify", True, f"step-1 rollouts identical across arms for {len(checks)} "
                 f"seed(s); {distinct}/{groups} groups distinct; seeds' game streams disjoint")


def _comparable(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not k.startswith(MEASURED_PREFIXES)}


def compare_runs(a: RunView, b: RunView, steps: int) -> str | None:
    """Why ``b`` (resumed) did not log what ``a`` (uninterrupted) logged: metrics per step
    (machine-dependent ones left out) to :data:`RESUME_TOL`, and every training step's
    rollouts (observations and actions); None when they agree."""
    from ccpo_lab.runs.rollouts import read_rollouts

    ra, rb = a.step_rows(), b.step_rows()
    for t in range(0, steps + 1):
        x, y = _comparable(ra.get(t, {})), _comparable(rb.get(t, {}))
        if set(x) != set(y):
            diff = sorted(set(x) ^ set(y))
            return f"step {t}: different metrics logged ({diff[:4]})"
        for k in sorted(x):
            if abs(float(x[k]) - float(y[k])) > RESUME_TOL:
                return f"step {t}: {k} = {x[k]!r} uninterrupted, {y[k]!r} resumed"
    for t in range(1, steps + 1):
        ea, eb = read_rollouts(a.path / "rollouts", t), read_rollouts(b.path / "rollouts", t)
        if not ea or not eb:
            return f"step {t}: rollouts/step-{t:06d}.jsonl missing"
        for i, (p, q) in enumerate(zip(ea, eb, strict=False)):
            acts_p = [(x.get("obs"), x.get("action")) for x in p.get("turns", [])]
            acts_q = [(x.get("obs"), x.get("action")) for x in q.get("turns", [])]
            if acts_p != acts_q:
                return f"step {t}: episode {i} differs (actions or observations)"
        if len(ea) != len(eb):
            return f"step {t}: {len(ea)} episodes uninterrupted, {len(eb)} resumed"
    return None


def check_resume(outcome: Mapping[str, Any], original: RunView | None, steps: int) -> Check:
    """The copy stopped after its first checkpoint resumed there (``run.json`` says so) and
    logged what the uninterrupted run logged."""
    path = Path(str(outcome.get("run_dir", "")))
    log = str(outcome.get("log", ""))
    if original is None:
        return Check("resume", False, "no uninterrupted run to compare with", where=log)
    if outcome.get("stopped_at_step") is None:
        return Check("resume", False, "the copy ended before it could be stopped after its "
                     "first checkpoint", where=log)
    if outcome.get("state_between") not in ("interrupted", "requeued", "cancelled"):
        return Check("resume", False, f"after SIGTERM the run is "
                     f"{outcome.get('state_between')!r}, not interrupted",
                     where=str(path / "state.json"))
    if outcome.get("second_exit") != 0:
        return Check("resume", False, f"the relaunch exited {outcome.get('second_exit')}",
                     where=log)
    runs = [r for r in load_runs(path.parent.parent) if r.path == path]
    if not runs or runs[0].state.get("state") != "completed":
        return Check("resume", False, "the relaunched run did not complete",
                     where=str(path / "state.json"))
    copy = runs[0]
    resumed = (copy.run.get("trainer") or {}).get("resume_from_step")
    if resumed is None or int(resumed) < 1:
        return Check("resume", False, f"the relaunch did not resume from a checkpoint "
                     f"(run.json trainer.resume_from_step = {resumed!r})",
                     where=str(path / "run.json"))
    why = compare_runs(original, copy, steps)
    if why is not None:
        return Check("resume", False, f"resumed run differs from {original.label}: {why}",
                     where=str(path / "metrics.jsonl"))
    return Check("resume", True, f"stopped at step {outcome.get('stopped_at_step')} after the "
                 f"step-1 checkpoint ({outcome.get('metrics_rows_between')} rows kept), resumed "
                 f"from step {resumed}; metrics to {RESUME_TOL:g} and every step's actions equal "
                 f"{original.label}'s")


LOAD_SCRIPT = r"""
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
out = {}
for name, path, tok_path in json.loads(sys.argv[1]):
    try:
        tok = AutoTokenizer.from_pretrained(tok_path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        enc = tok(["<|im_start|>user\nlook<|im_end|>\n<|im_start|>assistant\n"],
                  return_tensors="pt", add_special_tokens=False)
        enc.pop("token_type_ids", None)
        with torch.no_grad():
            gen = model.generate(**enc, max_new_tokens=8, do_sample=False,
                                 pad_token_id=tok.pad_token_id)
        out[name] = {"ok": True, "new_tokens": int(gen.shape[1] - enc["input_ids"].shape[1]),
                     "parameters": sum(p.numel() for p in model.parameters())}
    except Exception as e:
        out[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
print(json.dumps(out))
"""


def check_weights(runs: Sequence[RunView], python: str, base_model: str) -> Check:
    """The best and final Hugging Face weights of every run load with ``transformers`` (in
    the trainer environment) and generate."""
    jobs = []
    for r in runs:
        hf = r.run.get("hf_model") or {}
        for name in ("final", "best"):
            entry = hf.get(name)
            if not isinstance(entry, dict) or entry.get("error") or not entry.get("path"):
                why = entry.get("error") if isinstance(entry, dict) else "not recorded"
                return Check("weights", False, f"{r.label}: hf_model/{name}: {why}",
                             where=str(r.path / "run.json"))
            path = str(entry["path"])
            tok = path if (Path(path) / "tokenizer_config.json").is_file() else base_model
            jobs.append((f"{r.label}/{name}", path, tok))
    res = subprocess.run([python, "-c", LOAD_SCRIPT, json.dumps(jobs)], capture_output=True,
                         text=True, check=False, timeout=600)
    try:
        out = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [""]
        return Check("weights", False, f"the loader failed: {tail[0][:200]}", where=python)
    for name, got in out.items():
        if not got.get("ok") or int(got.get("new_tokens", 0)) < 1:
            return Check("weights", False, f"{name}: {got.get('error', 'generated nothing')}",
                         where=str(next(p for n, p, _ in jobs if n == name)))
    steps = sorted({int((r.run.get("hf_model") or {}).get("best", {}).get("step") or 0)
                    for r in runs})
    return Check("weights", True, f"{len(jobs)} models (final and best of {len(runs)} runs; "
                 f"best at step(s) {steps}) load with transformers and generate")


def check_command(name: str, argv: Sequence[str], expect: Callable[[], str | None]) -> Check:
    """Run a ccpo-lab command (this interpreter); passes on exit 0 and ``expect() is None``."""
    r = subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", *argv], capture_output=True,
                       text=True, check=False, timeout=1800)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
        return Check(name, False, f"`ccpo-lab {' '.join(argv)}` exited {r.returncode}: "
                     f"{tail[0][:200]}", where=f"ccpo-lab {' '.join(argv)}")
    why = expect()
    if why is not None:
        return Check(name, False, why, where=f"ccpo-lab {' '.join(argv)}")
    return Check(name, True, f"`ccpo-lab {' '.join(argv)}` exited 0")
