"""Executing one evaluation job: its evaluations, repeat by repeat, resumable.

:func:`ccpo_lab.runs.execute.execute_run` calls :func:`run_eval_job` for a job directory
(:func:`ccpo_lab.runs.evals.is_eval_job`), holding the job's ownership lock: so every
launcher executes jobs exactly as it executes runs, a requeued or relaunched job resumes,
and ``status`` / ``cancel`` follow it. For each evaluation of ``request.json``:

- its file exists (complete): nothing to do;
- another job holds the evaluation's lock (two requests raced for it): left to it;
- else each repeat is played by the backend (:mod:`ccpo_lab.backends.eval_contract`) unless
  the job's ``partial/`` already holds it (a job interrupted after it), then kept there
  atomically; once every repeat is in, the file ``evals/<key>.jsonl`` is written whole
  (:func:`ccpo_lab.runs.evals.write_eval_file`) and the partial repeats removed.

Every repeat of an evaluation must play the games of the first, in its order (the draw
is one list); a backend that plays others fails the job rather than write a file whose
episodes do not line up.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ccpo_lab
from ccpo_lab.backends.eval_contract import RepeatResult, eval_backend
from ccpo_lab.config.yamlio import atomic_write_text
from ccpo_lab.evaluation.spec import EvalTarget, target_from_json
from ccpo_lab.placement import Placement
from ccpo_lab.runs.evals import FORMAT, EvalJobDir, eval_path, evals_dir, write_eval_file
from ccpo_lab.runs.layout import load_run_config
from ccpo_lab.runs.provenance import now_iso


@contextlib.contextmanager
def _key_lock(job: EvalJobDir, key: str) -> Iterator[bool]:
    """An exclusive lock on one evaluation (``evals/.lock-<key>``): yields False when
    another process computes it."""
    path = evals_dir(job.run_dir) / f".lock-{key}"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        except OSError:
            yield True  # a file system without locks: the job's own lock still holds
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _load_partial(path: Path) -> RepeatResult | None:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        return RepeatResult(tuple(d["games"]), tuple(d["episodes"]), dict(d.get("info") or {}))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _save_partial(path: Path, res: RepeatResult) -> None:
    atomic_write_text(path, json.dumps({"games": list(res.games),
                                        "episodes": list(res.episodes), "info": res.info},
                                       sort_keys=True) + "\n")


def _say(job: EvalJobDir, text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {job.arm} seed {job.seed} evaluation "
          f"{job.job_id}: {text}", flush=True)


def header(job: EvalJobDir, run: Any, target: EvalTarget, games: tuple[str, ...],
           checkpoint: str, infos: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    """The first line of an evaluation file."""
    s = target.setting
    return {"eval": FORMAT, "key": target.key, "run_id": run.run_id, "sweep": run.sweep,
            "arm": run.arm, "seed": run.seed, "backend": run.backend.kind, "split": s.split,
            "episodes": s.episodes, "repeats": s.repeats, "temperature": s.temperature,
            "checkpoint": {"step": target.step, "weights": checkpoint},
            "draw": {"id": target.draw_id, "spec": dict(target.draw), "games": list(games)},
            "job": job.job_id, "created": now_iso(), "wall_s": round(wall, 2),
            "ccpo_lab": ccpo_lab.__version__, "backend_info": infos}


def _one(job: EvalJobDir, run: Any, backend: Any, target: EvalTarget,
         placement: Placement, done: list[int], total: int) -> str:
    """Compute one evaluation (its missing repeats, then its file); ``written`` or why
    not."""
    final = eval_path(job.run_dir, target.key)
    if final.is_file():
        done[0] += target.setting.episodes * target.setting.repeats
        return "done before"
    with _key_lock(job, target.key) as mine:
        if not mine:
            return "computed by another job"
        started = time.perf_counter()
        results: list[RepeatResult] = []
        for r in range(target.setting.repeats):
            part = job.partial_file(target.key, r)
            res = _load_partial(part)
            if res is None:
                res = backend.evaluate(run, job.run_dir, target, r, job, placement)
                _check(target, res, results[0] if results else None, r)
                _save_partial(part, res)
            else:
                _check(target, res, results[0] if results else None, r)
            results.append(res)
            done[0] += target.setting.episodes
            job.write_state("running", step=done[0], total_steps=total)
            _say(job, f"{target.key}: repeat {r + 1}/{target.setting.repeats}, success "
                      f"{sum(bool(e['success']) for e in res.episodes)}/{len(res.episodes)}")
        games = results[0].games
        episodes = [{**e, "repeat": r, "i": i, "game": games[i]}
                    for r, res in enumerate(results) for i, e in enumerate(res.episodes)]
        weights = str(results[0].info.get("checkpoint", ""))
        write_eval_file(final, header(job, run, target, games, weights,
                                      [res.info for res in results],
                                      time.perf_counter() - started), episodes)
        shutil.rmtree(job.partial / target.key, ignore_errors=True)
        return "written"


def _check(target: EvalTarget, res: RepeatResult, first: RepeatResult | None, r: int) -> None:
    n = target.setting.episodes
    if len(res.games) != n or len(res.episodes) != n:
        raise RuntimeError(f"{target.key} repeat {r}: the backend played {len(res.episodes)} "
                           f"episodes of {len(res.games)} games, not {n}")
    if first is not None and res.games != first.games:
        diff = next(i for i, (a, b) in enumerate(zip(res.games, first.games, strict=True))
                    if a != b)
        raise RuntimeError(f"{target.key} repeat {r}: game {diff} is {res.games[diff]}, "
                           f"repeat 0 played {first.games[diff]}: the draw is not one list")


def run_eval_job(path: str | Path, placement: Placement) -> dict[str, Any]:
    """Execute the evaluation job in ``path`` (task 0, holding its lock); return a summary:
    what happened to each key and the wall time."""
    job = EvalJobDir(Path(path))
    request = job.read_request()
    run = load_run_config(job.run_dir)
    if request.get("run_id") != run.run_id:
        raise RuntimeError(f"the job evaluates run {request.get('run_id')}, the directory "
                           f"holds {run.run_id}")
    backend = eval_backend(run.backend.kind)
    targets = [target_from_json(t) for t in request.get("targets", [])]
    total = sum(t.setting.episodes * t.setting.repeats for t in targets)
    done = [0]
    started = time.perf_counter()
    job.write_state("running", step=0, total_steps=total)
    outcome = {t.key: _one(job, run, backend, t, placement, done, total) for t in targets}
    _say(job, ", ".join(f"{k}: {v}" for k, v in outcome.items()))
    return {"keys": outcome, "episodes": done[0], "wall_s": round(time.perf_counter() - started, 2)}


def serve_eval_job(path: str | Path, placement: Placement) -> dict[str, Any]:
    """A task other than rank 0 of a multi-node job: the backend's ``worker`` for each
    evaluation of the job, when it has one."""
    job = EvalJobDir(Path(path))
    run = load_run_config(job.run_dir)
    worker = getattr(eval_backend(run.backend.kind), "worker", None)
    if worker is None:
        return {"rank": placement.rank}
    for t in job.read_request().get("targets", []):
        worker(run, job.run_dir, target_from_json(t), job, placement)
    return {"rank": placement.rank}
