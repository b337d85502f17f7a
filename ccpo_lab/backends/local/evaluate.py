"""The CPU backend's checkpoint evaluation (``ccpo-lab evaluate``; the contract is
:mod:`ccpo_lab.backends.eval_contract`).

Checkpoints: ``checkpoints/step-<k>.pt`` (the newest two and the final one) and the best
held-out evaluation's, ``checkpoints/best/`` (:func:`~.checkpoint.save_best`). Splits:

- ``in``: the run's held-out games (``valid_seen``), the first ``N`` in the game set's
  order (1 <= N <= ``backend.local.n_eval_games``);
- ``out``: ``N`` games of :mod:`.ood` (rooms, objects and receptacles no training game
  contains; 1 <= N <= :data:`~.ood.MAX_GAMES`), generated on first use beside the game set.

The draw is the same for every arm and seed of a sweep: those games in that order, each
played ``R`` times, episode (game ``g``, repeat ``r``) of run seed ``s`` sampling its
actions from its own generator ``numpy.random.default_rng([0xE7A1, s, split, g, r])``
(one uniform draw per turn, inverse CDF, as in training), so two arms of a seed sample
with the same random numbers on the same game and repeat (common random numbers), and no
episode's draws depend on the others'. The episodes of a repeat play in lockstep, one
policy batch per turn, at the request's temperature (0: greedy).
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccpo_lab.backends.eval_contract import Checkpoints, EpisodeRange, RepeatResult
from ccpo_lab.backends.local.checkpoint import (
    BEST_DIR,
    checkpoint_path,
    list_checkpoints,
    load_checkpoint,
    read_best,
)
from ccpo_lab.backends.local.envs import environment_of
from ccpo_lab.backends.local.runner import load_games
from ccpo_lab.errors import UserError
from ccpo_lab.runs.references import Reference, is_reference_dir, read_reference

if TYPE_CHECKING:
    from ccpo_lab.config.schema import RunConfig
    from ccpo_lab.evaluation.spec import EvalSetting, EvalTarget
    from ccpo_lab.placement import Placement
    from ccpo_lab.runs.evals import EvalJobDir
    from ccpo_lab.runs.layout import RunDir

DRAW_TAG = 0xE7A1
"""First word of every evaluation episode's generator key."""
DRAW_VERSION = 1
"""Bump when the draw (games, order, sampling) changes: it is in every evaluation's key."""
SPLIT_CODE = {"in": 1, "out": 2}


def checkpoints(run: RunConfig, rd: RunDir) -> Checkpoints:
    """The run's checkpoints: retained steps, the final one (completed runs), the best."""
    steps = {s: str(p.relative_to(rd.path)) for s, p in list_checkpoints(rd.checkpoints)}
    best = read_best(rd.checkpoints)
    if best is not None:
        steps.setdefault(int(best["step"]), f"checkpoints/{BEST_DIR}/{best['file']}")
    total = run.protocol.total_steps
    state = rd.read_state()
    final = total if state.get("state") == "completed" and total in steps else None
    final_why = "" if final is not None else (
        f"the run is not finished (state {state.get('state', 'unknown')}, step "
        f"{state.get('step', 0)} of {total})" if state.get("state") != "completed"
        else f"its final checkpoint (step {total}) is missing")
    return Checkpoints(steps=steps, final=final,
                       best=None if best is None else int(best["step"]),
                       best_value=None if best is None else float(best["value"]),
                       final_why=final_why,
                       best_why="" if best is not None else
                       "none kept (no evaluation yet, or trained before ccpo-lab kept it)")


def episodes(run: RunConfig, split: str) -> EpisodeRange:
    """Games of a split: default the training-time evaluation's episodes, capped by the
    split's games (the run's environment says how many it has)."""
    if split not in SPLIT_CODE:
        raise UserError("the local backend has no such split", key="--split", value=split,
                        valid=list(SPLIT_CODE))
    return environment_of(run).episodes(run, split)


def draw(run: RunConfig, rd: RunDir, setting: EvalSetting) -> dict[str, Any]:
    """The draw of ``setting`` (no arm or seed in it): the game set, which of its games,
    the repeats, the episode length and how sampling seeds are derived."""
    env = environment_of(run)
    games = env.draw(run, setting)
    out: dict[str, Any] = {
        "backend": "local", "version": DRAW_VERSION, "split": setting.split,
        "game_set": games.pop("game_set"), "games": setting.episodes,
        "repeats": setting.repeats,
        "order": "the split's first games, in the game set's order",
        "max_steps": run.protocol.max_steps, "history_length": run.protocol.history_length,
        "max_prompt_length": run.protocol.max_prompt_length,
        "sampling": f"numpy default_rng([{DRAW_TAG:#x}, run seed, {SPLIT_CODE[setting.split]},"
                    " game index, repeat]): one uniform per turn, inverse CDF",
    }
    out.update(games)
    if env.name != "alfworld":
        out["environment"] = env.name
    return out


def checkpoint_file(rd: RunDir, step: int) -> Path:
    """The file holding the weights of ``step`` (a retained step, else the best's)."""
    path = checkpoint_path(rd.checkpoints, step)
    if path.is_file():
        return path
    best = read_best(rd.checkpoints)
    if best is not None and int(best["step"]) == step:
        return rd.checkpoints / BEST_DIR / str(best["file"])
    raise UserError("no checkpoint at this step", file=rd.path, key="step", value=step)


_POLICIES: dict[tuple[str, int], Any] = {}
"""(run directory, step) -> the trainer holding that checkpoint (this process's repeats)."""


def _trainer_at(run: RunConfig, rd: RunDir, games: Any, step: int) -> tuple[Any, Path]:
    from ccpo_lab.backends.local.trainer import Trainer

    key = (str(rd.path.resolve()), step)
    path = checkpoint_file(rd, step)
    if key not in _POLICIES:
        state = load_checkpoint(path)
        if state.get("run_id") != run.run_id:
            raise UserError("checkpoint belongs to another run", file=path,
                            value=state.get("run_id"))
        if state.get("games") != games.root.name:
            raise UserError("checkpoint was trained on another game set", file=path,
                            value=state.get("games"), valid=[games.root.name])
        trainer = Trainer(run, games)
        trainer.load_state_dict(state["trainer"])
        if trainer.step != step:
            raise RuntimeError(f"{path} holds step {trainer.step}, not {step}")
        _POLICIES.clear()
        _POLICIES[key] = trainer
    return _POLICIES[key], path


def split_games(run: RunConfig, rd: RunDir, split: str, n: int) -> tuple[Any, list[Any]]:
    """(the run's game set, the first ``n`` games of ``split``)."""
    games = load_games(run, rd)
    pool = environment_of(run).split_games(run, games, split, n)
    if len(pool) != n:
        raise UserError(f"split {split!r} has {len(pool)} games", key="--episodes", value=n)
    return games, pool


def episode_generators(seed: int, split: str, games: list[int], repeat: int) -> list[Any]:
    """One generator per episode: ``default_rng([0xE7A1, seed, split, game, repeat])``
    (nothing of the arm, the checkpoint or the other episodes in it)."""
    import numpy as np

    code = SPLIT_CODE[split]
    return [np.random.default_rng([DRAW_TAG, int(seed), code, int(g), int(repeat)])
            for g in games]


def _reference_at(run: RunConfig, rd: RunDir, games: Any, ref: Reference
                  ) -> tuple[Any, Any, Any, str]:
    """(policy, engine pool, prompt settings, what it is) of a reference policy: ``base``,
    the policy the seed's runs start from (a fresh trainer's, warm start included);
    ``hf``, the causal LM of its folder (:mod:`.hf_policy`)."""
    from ccpo_lab.backends.local.prompts import PromptSettings
    from ccpo_lab.backends.local.rollout import EnginePool
    from ccpo_lab.backends.local.trainer import Trainer

    key = (str(rd.path.resolve()), -1)
    if key not in _POLICIES:
        if ref.kind == "base":
            trainer = Trainer(run, games)
            trainer.initialise()
            trainer.policy.eval()
            value: Any = (trainer.policy, trainer.eval_pool, trainer.prompts,
                          f"base: seed {run.seed}'s policy before its first update")
        else:
            from ccpo_lab.backends.local.hf_policy import load_scorer

            p, cfg = run.protocol, run.backend.local
            prompts = PromptSettings(p.history_length, p.max_prompt_length, cfg.vocab_size,
                                     view=environment_of(run).view)
            value = (load_scorer(str(ref.path), prompts),
                     EnginePool(p.max_steps, environment_of(run).open_engine), prompts,
                     f"{ref.label} ({ref.path})")
        _POLICIES.clear()
        _POLICIES[key] = value
    return _POLICIES[key]


def _policy_for(run: RunConfig, rd: RunDir, games: Any, step: int) -> tuple[Any, Any, Any, str]:
    """(policy, engine pool, prompt settings, its weights) of a checkpoint or reference."""
    ref = read_reference(rd)
    if ref is not None:
        return _reference_at(run, rd, games, ref)
    trainer, path = _trainer_at(run, rd, games, step)
    trainer.policy.eval()
    return trainer.policy, trainer.eval_pool, trainer.prompts, str(path.relative_to(rd.path))


def evaluate(run: RunConfig, rd: RunDir, target: EvalTarget, repeat: int, job: EvalJobDir,
             placement: Placement | None = None) -> RepeatResult:
    """Play repeat ``repeat`` of ``target`` on the checkpoint of its step (or on the
    reference policy ``rd`` holds)."""
    import torch

    from ccpo_lab.backends.local.rollout import Timer, play

    started = time.perf_counter()
    s = target.setting
    torch.set_num_threads(run.backend.local.num_threads)
    games, pool = split_games(run, rd, s.split, s.episodes)
    policy, engines, prompts, weights = _policy_for(run, rd, games, target.step)
    rngs = episode_generators(run.seed, s.split, [g.index for g in pool], repeat)
    eps = play(policy, engines, pool, [f"eval-{i}" for i in range(len(pool))],
               [repeat] * len(pool), s.temperature, rngs, prompts, Timer(),
               slots=[0] * len(pool))
    records = tuple({"task_type": e.game.task_type, "success": bool(e.won),
                     "reward": float(sum(t.reward for t in e.turns)), "turns": len(e.turns),
                     "invalid": int(sum(not t.valid for t in e.turns))} for e in eps)
    return RepeatResult(games=tuple(e.task_id for e in eps), episodes=records,
                        info={"checkpoint": weights,
                              "wall_s": round(time.perf_counter() - started, 2)})


def describe(run: RunConfig, rd: RunDir, target: EvalTarget, job: EvalJobDir) -> str:
    """The command of the job, with what it plays."""
    s = target.setting
    split = "held-out games" if s.split == "in" else "out-of-distribution games"
    what = f"checkpoint of step {target.step}" if not is_reference_dir(rd) else \
        f"reference policy {rd.path.parent.name}"
    return (shlex.join(["python", "-m", "ccpo_lab.runs.execute", str(job.path)])
            + f"  # local CPU backend: {what}, the first "
              f"{s.episodes} {split} x {s.repeats} repeat(s) at temperature {s.temperature:g}")
