"""``train(run, run_dir)``: one local-backend run, resumable, with verl-format metrics.

What a run leaves in its directory (see :mod:`ccpo_lab.runs.layout`):

- ``metrics.jsonl``: row 0 = held-out evaluation before training (plus warm-start
  statistics), then one row per step (``episode/*``, ``adv/*``, ``actor/*``, and ``val/*``
  at evaluation steps); appended and fsynced per step;
- ``rollouts/step-000001.jsonl`` and ``run.json["step1"]``: step 1's episodes, written
  before the first update;
- ``run.json["estimator_instantiated"]``: the estimator actually built (the run fails at
  start if it differs from the configuration); ``run.json["games"]``: the game set;
  ``run.json["warm_start"]``: the warm start's file shared by the seed's runs and whether
  this run loaded it (see :mod:`.warmstart`);
- ``checkpoints/step-<k>.pt`` every ``save_freq`` steps and at the end;
- ``checkpoints/best/``: the checkpoint of the best held-out evaluation so far (step 0, the
  warm-started policy, included; ties keep the earlier step) and ``best.json`` naming it,
  so ``ccpo-lab evaluate --checkpoint best`` can re-score it after the newer checkpoints
  have replaced it (:func:`~.checkpoint.save_best`).

A restarted run resumes from its newest checkpoint, first dropping metric rows after it,
and continues bit-identically (every random draw comes from generators in the checkpoint,
evaluation draws are keyed by (seed, step), torch runs on ``num_threads`` threads).
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccpo_lab.backends.local.checkpoint import (
    list_checkpoints,
    load_checkpoint,
    read_best,
    remove_partial,
    save_best,
    save_checkpoint,
)
from ccpo_lab.config.identity import canonical_json, to_plain
from ccpo_lab.errors import UserError
from ccpo_lab.placement import Needs
from ccpo_lab.runs.cost import peak_rss_gb
from ccpo_lab.runs.rollouts import rollout_file, write_rollouts
from ccpo_lab.runs.wandb_run import final_summary, open_live_run

if TYPE_CHECKING:
    from ccpo_lab.backends.local.games import GameSpec
    from ccpo_lab.backends.local.rollout import Episode, Timer
    from ccpo_lab.config.schema import RunConfig
    from ccpo_lab.placement import Placement
    from ccpo_lab.runs.layout import RunDir
    from ccpo_lab.runs.wandb_run import LiveRun

Progress = Callable[[int, int, "float | None"], None]
"""``progress(step, total_steps, last held-out success)``."""

VAL_METRIC = "val/success_rate"


JOB_REQUIRES = (("torch", "pip install 'ccpo-lab[local]'"),
                ("alfworld", "pip install 'ccpo-lab[local]'"))
"""What a run of this backend imports beyond ccpo-lab's base install (the launch checks
it in the interpreter its jobs run: :func:`ccpo_lab.config.backends.missing_job_modules`)."""


def job_requires(run: RunConfig) -> tuple[tuple[str, str], ...]:
    """:data:`JOB_REQUIRES` and what ``run``'s environment imports (its ``required``)."""
    from ccpo_lab.backends.local.envs import environment_of

    return (*JOB_REQUIRES, *environment_of(run).required)


def needs(run: RunConfig) -> Needs:
    """One node, no GPU, ``num_threads`` CPUs (the placement contract)."""
    return Needs(nodes=1, gpus_per_node=0, cpus=run.backend.local.num_threads)


def game_spec(run: RunConfig) -> GameSpec:
    """The ALFWorld game set a run trains and evaluates on (from ``backend.local``)."""
    from ccpo_lab.backends.local.envs.alfworld.environment import game_spec as spec

    return spec(run)


def games_cache(run: RunConfig, rd: RunDir) -> Path:
    """Where generated game sets live: ``backend.local.games_cache`` or ``<results>/.games``."""
    from ccpo_lab.backends.local.envs.base import games_cache as cache

    return cache(run, rd)


def load_games(run: RunConfig, rd: RunDir) -> Any:
    """The run's game set (its environment's: :mod:`.envs`), generated into the cache on
    first use (shared by all runs; runs starting together wait while one generates it)."""
    from ccpo_lab.backends.local.envs import environment_of

    return environment_of(run).load_games(run, rd)


def check_estimator(run: RunConfig, rd: RunDir) -> Any:
    """Instantiate the arm's estimator, record it in ``run.json``, fail if it differs."""
    from ccpo_lab.estimators import get_estimator  # its registry imports numpy and torch

    est = get_estimator(run.estimator.name, **dict(run.estimator.params))
    made = {"name": str(est.name), "params": to_plain(dict(est.params))}
    wanted = {"name": run.estimator.name, "params": to_plain(dict(run.estimator.params))}
    rd.update_run(estimator_instantiated=made)
    if canonical_json(made) != canonical_json(wanted):
        raise RuntimeError(f"instantiated estimator {canonical_json(made)} differs from the "
                           f"resolved configuration {canonical_json(wanted)}")
    return est


def _record_step1(rd: RunDir, step: int, episodes: list[Episode]) -> None:
    if step != 1:
        return
    evidence = [e.evidence() for e in episodes]
    digest = write_rollouts(rd.rollouts, evidence, step=1)
    rd.update_run(step1={"fingerprint": digest, "episodes": len(evidence),
                         "file": str(rollout_file(rd.rollouts, 1).relative_to(rd.path))})


def resume_step(rd: RunDir) -> int | None:
    """The step of the checkpoint :func:`train` resumes from (:func:`resumable_checkpoint`:
    the newest whose step has its metrics row)."""
    found = _resumable(rd)
    return None if found is None else found[0]


def train(run: RunConfig, rd: RunDir, placement: Placement | None = None,
          progress: Progress | None = None) -> dict[str, Any]:
    """Train ``run`` in ``rd`` to ``total_steps``, resuming from its newest checkpoint.

    ``placement``: where the launcher put it (one CPU task; nothing in it changes results).
    When the sweep logs to Weights & Biases (``tracking.wandb``), every metrics row goes to
    the run's W&B run too (:class:`ccpo_lab.runs.wandb_run.LiveRun`), closed with the
    run's summary.

    Returns a summary (final held-out success, steps, wall time, throughput).
    """
    live = open_live_run(run, rd)
    try:
        out = _train(run, rd, progress, live)
    except BaseException:
        if live is not None:
            live.finish(exit_code=1)
        raise
    if live is not None:
        live.finish(final_summary(rd))
    return out


def _train(run: RunConfig, rd: RunDir, progress: Progress | None,
           live: LiveRun | None) -> dict[str, Any]:
    """:func:`train`'s work: start or resume (:func:`_start`), then step, evaluate,
    checkpoint and record each step (:func:`_step`)."""
    started = time.perf_counter()
    trainer, games_key, resumed_from, last_val, best = _start(run, rd, live)
    total = run.protocol.total_steps
    rd.write_state("running", step=trainer.step, total_steps=total, last_val=last_val)
    if progress is not None:
        progress(trainer.step, total, last_val)
    while trainer.step < total:
        last_val = _step(run, rd, trainer, games_key, last_val, best, live)
        rd.write_state("running", step=trainer.step, total_steps=total, last_val=last_val)
        if progress is not None:
            progress(trainer.step, total, last_val)
    wall = time.perf_counter() - started
    t = trainer.timer
    return {"final_val_success": last_val, "steps": trainer.step, "resumed_from": resumed_from,
            "wall_s": round(wall, 2), "env_steps": t.env_steps, "env_s": round(t.env, 2),
            "policy_s": round(t.policy, 2),
            "env_steps_per_s": round(t.env_steps / wall, 1) if wall > 0 else None}


def _start(run: RunConfig, rd: RunDir, live: LiveRun | None
           ) -> tuple[Any, str, int | None, float | None, _BestSoFar]:
    """The run's trainer, from its newest resumable checkpoint or fresh (warm start and the
    step-0 evaluation, logged): (trainer, game set key, step resumed from, last held-out
    success, the best so far)."""
    import torch

    from ccpo_lab.backends.local.trainer import Trainer

    run.backend.local.validate(file=str(rd.config_yaml))
    torch.set_num_threads(run.backend.local.num_threads)
    estimator = check_estimator(run, rd)
    games = load_games(run, rd)
    rd.update_run(games={"key": games.root.name, "root": str(games.root),
                         "n_train": len(games.train), "n_eval": len(games.eval)})
    trainer = Trainer(run, games, estimator=estimator)
    remove_partial(rd.checkpoints)
    ckpt = resumable_checkpoint(rd)
    best = _BestSoFar(rd, run, games.root.name)
    if ckpt is not None:
        last_val = _resume(run, rd, trainer, ckpt, games.root.name, best)
        return trainer, games.root.name, trainer.step, last_val, best
    return trainer, games.root.name, None, _fresh(rd, trainer, best, live), best


def _resume(run: RunConfig, rd: RunDir, trainer: Any, ckpt: Path, games_key: str,
            best: _BestSoFar) -> float | None:
    """Load ``ckpt`` into ``trainer`` (refused when it is another run's or another game
    set's), drop the metric rows after it; returns its last held-out success."""
    from ccpo_lab.runs.metrics import truncate_metrics

    state = load_checkpoint(ckpt)
    if state.get("run_id") != run.run_id:
        raise UserError("checkpoint belongs to another run", file=ckpt,
                        value=state.get("run_id"))
    if state.get("games") != games_key:
        raise UserError("checkpoint was trained on another game set", file=ckpt,
                        value=state.get("games"), valid=[games_key])
    trainer.load_state_dict(state["trainer"])
    truncate_metrics(rd.metrics, trainer.step)
    best.resume(trainer.step)
    last: float | None = state.get("last_val")
    return last


def _fresh(rd: RunDir, trainer: Any, best: _BestSoFar, live: LiveRun | None
           ) -> float | None:
    """A fresh start: the warm start, the step-0 evaluation (row 0); returns its success."""
    from ccpo_lab.runs.metrics import append_metrics, truncate_metrics

    truncate_metrics(rd.metrics, -1)
    row = trainer.initialise()
    if trainer.warm_start_provenance is not None:
        rd.update_run(warm_start=trainer.warm_start_provenance)
    t0 = time.perf_counter()
    row.update(trainer.evaluate(0))
    row.update({"timing_s/testing": time.perf_counter() - t0, **_memory()})
    last_val = row.get(VAL_METRIC)
    append_metrics(rd.metrics, 0, row)
    if live is not None:
        live.log(0, row)
    best.offer(0, last_val, trainer, save_best)
    return last_val


def _step(run: RunConfig, rd: RunDir, trainer: Any, games_key: str, last_val: float | None,
          best: _BestSoFar, live: LiveRun | None) -> float | None:
    """One training step: rollouts and update, the evaluation at evaluation steps, the
    checkpoint at save steps (before the row, whose time it is in: a run killed between
    the two resumes from the checkpoint before, :func:`resumable_checkpoint`), the row.
    Returns the last held-out success."""
    from ccpo_lab.runs.metrics import append_metrics

    p = run.protocol
    t0, before = time.perf_counter(), trainer.timer.snapshot()
    row = trainer.train_step(on_rollouts=lambda k, eps: _record_step1(rd, k, eps))
    spent = trainer.timer - before
    row.update(_step_timing(spent))
    k = trainer.step
    evaluated = k in set(p.eval_steps)
    if evaluated:
        t1 = time.perf_counter()
        row.update(trainer.evaluate(k))
        row["timing_s/testing"] = time.perf_counter() - t1
        last_val = row.get(VAL_METRIC, last_val)
    if k % p.save_freq == 0 or k == p.total_steps:
        t1 = time.perf_counter()
        save_checkpoint(rd.checkpoints, k, {"run_id": run.run_id, "games": games_key,
                                            "last_val": last_val,
                                            "trainer": trainer.state_dict()})
        row["timing_s/save_checkpoint"] = time.perf_counter() - t1
    row.update(_throughput(spent, time.perf_counter() - t0))
    append_metrics(rd.metrics, k, row)
    if live is not None:
        live.log(k, row)
    if evaluated:
        best.offer(k, row.get(VAL_METRIC), trainer, save_best)
    return last_val


def resumable_checkpoint(rd: RunDir) -> Path | None:
    """The newest checkpoint whose step has its metrics row (None: start afresh).

    A checkpoint is saved just before its step's row is appended; a run killed between
    the two resumes from the checkpoint before (whose rows are all there), so no row is
    lost.
    """
    found = _resumable(rd)
    return None if found is None else found[1]


def _resumable(rd: RunDir) -> tuple[int, Path] | None:
    """(step, file) of :func:`resumable_checkpoint`."""
    from ccpo_lab.runs.metrics import MetricsScan

    found = list_checkpoints(rd.checkpoints)
    if not found:
        return None
    logged = {row.step for row in MetricsScan(rd.metrics, keep=0)}
    usable = [(step, path) for step, path in found if step in logged]
    return usable[-1] if usable else None


def _step_timing(spent: Timer) -> dict[str, float]:
    """A step's phases under verl's names (:data:`ccpo_lab.runs.cost.PHASES`): the rollout
    (engines and policy forwards), the reference pass, the estimator, the PPO update."""
    return {"timing_s/gen": spent.env + spent.forward, "timing_s/ref": spent.reference,
            "timing_s/adv": spent.estimator, "timing_s/update_actor": spent.update}


def _throughput(spent: Timer, wall: float) -> dict[str, float]:
    """The step's wall time (evaluation and checkpoint included), its training environment
    steps per second of that time, and the peak memory."""
    out = {"timing_s/step": wall, **_memory()}
    if wall > 0:
        out["perf/env_steps_per_s"] = spent.env_steps / wall
    return out


def _memory() -> dict[str, float]:
    """``perf/max_rss_gb``: the process's peak resident set so far."""
    return {"perf/max_rss_gb": peak_rss_gb()}


def describe(run: RunConfig, rd: RunDir, placement: Placement | None = None) -> str:
    """The command that executes ``run``, with what it will do."""
    from ccpo_lab.backends.local.envs import environment_of

    p = run.protocol
    cmd = shlex.join(["python", "-m", "ccpo_lab.runs.execute", str(rd.path)])
    return (f"{cmd}  # local CPU backend: {p.total_steps} steps x {p.train_batch_size} tasks x "
            f"{p.group_size} rollouts on {environment_of(run).summary(run)}, "
            f"{p.val_batch_size} held-out episodes every {p.test_freq} steps")


class _BestSoFar:
    """The best held-out evaluation of a run so far, and keeping its checkpoint."""

    def __init__(self, rd: RunDir, run: RunConfig, games_key: str) -> None:
        self.rd, self.run, self.games_key = rd, run, games_key
        self.value = float("-inf")

    def resume(self, step: int) -> None:
        """After a resume from ``step``: the recorded best, else (a run trained before the
        best checkpoint was kept) the best evaluation logged so far, whose weights are
        gone: no later, lower evaluation is then taken for the best."""
        from ccpo_lab.runs.metrics import read_metrics, series

        record = read_best(self.rd.checkpoints)
        if record is not None and int(record["step"]) <= step:
            self.value = float(record["value"])
            return
        _, vals = series(read_metrics(self.rd.metrics), VAL_METRIC)
        self.value = float(vals.max()) if vals.size else float("-inf")

    def offer(self, step: int, value: float | None, trainer: Any, save: Any) -> None:
        """Keep the trainer's state as the best checkpoint when ``value`` beats the best."""
        if value is None or not float(value) > self.value:
            return
        self.value = float(value)
        save(self.rd.checkpoints, step, self.value, VAL_METRIC,
             {"run_id": self.run.run_id, "games": self.games_key, "last_val": self.value,
              "trainer": trainer.state_dict()})
