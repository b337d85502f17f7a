"""Episodes on the real engine: lockstep rollouts of the policy over generated games.

Engines are opened once per process and kept (:class:`EnginePool`); the episodes of one
:func:`play` call run on distinct engines in lockstep, so the policy scores them as one batch.
Every episode records, per turn, what the trainer needs (prompt tokens, candidate actions,
the chosen one, its log-probability) and what ``run.json``'s step-1 evidence needs
(observation, admissible actions, chosen action, a hash of the policy's input tokens).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from ccpo_lab.backends.local.env import AlfworldEnv
from ccpo_lab.backends.local.policy import (
    chosen_logprobs,
    sample_actions,
)
from ccpo_lab.backends.local.prompts import (
    TASK_METRIC_NAMES,
    PromptSettings,
    Turn,
    TurnInput,
    choices,
)

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ccpo_lab.backends.local.envs.base import Engine
    from ccpo_lab.backends.local.games import GameRecord


class Scorer(Protocol):
    """What an episode asks of a policy: the trained :class:`~.policy.ActionScorer`, or a
    reference (:class:`~.hf_policy.CausalLMScorer`)."""

    def frozen(self) -> AbstractContextManager[None]:
        """A span of passes without parameter changes."""

    def encode_turn(self, task: str, observation: str, candidates: Sequence[str],
                    history: Sequence[Turn], prompts: PromptSettings) -> Any:
        """What it reads in one turn (hashable; ``hash()`` gives the evidence's hash)."""

    def score(self, inputs: Sequence[Any]) -> torch.Tensor:
        """Logits (B, A) over each turn's candidates, -inf at padding."""


@dataclass
class TurnRecord:
    """One agent turn."""

    observation: str
    """Observation the action was taken in (raw engine feedback)."""
    admissible: tuple[str, ...]
    """The engine's admissible commands."""
    candidates: tuple[str, ...]
    """What the policy chose from (admissible minus ``help``)."""
    inputs: TurnInput
    """What the policy read."""
    chosen: int
    """Index into ``candidates``."""
    logprob: float
    """log pi(chosen) under the sampling policy at the sampling temperature."""
    valid: bool = True
    """Whether the action was admissible."""
    reward: float = 0.0
    """Engine reward of the step (10 on the winning step)."""

    @property
    def action(self) -> str:
        """The chosen action text."""
        return self.candidates[self.chosen]


@dataclass
class Episode:
    """One episode of one game."""

    game: GameRecord
    """The game played."""
    task_uid: str
    """Group id (same for the rollouts of one task in one training step)."""
    rollout: int
    """Rollout index within the group."""
    turns: list[TurnRecord] = field(default_factory=list)
    won: bool = False

    @property
    def task_id(self) -> str:
        """Stable id of the game (``<split>/<index>``)."""
        return f"{self.game.split}/{self.game.index:05d}"

    def evidence(self) -> dict[str, Any]:
        """The step-1 record of this episode (see :mod:`ccpo_lab.runs.rollouts`)."""
        return {"task_id": self.task_id, "rollout": self.rollout,
                "task_type": self.game.task_type, "won": self.won,
                "turns": [{"obs": t.observation, "admissible": list(t.admissible),
                           "action": t.action, "input_hash": t.inputs.hash()}
                          for t in self.turns]}


class EnginePool:
    """Engines keyed by (game file, slot), opened on first use and kept for the process.

    Engines are reset before every episode, so reuse across runs in one process (the inline
    launcher) cannot change results; it only saves the load (about 0.05-0.1 s a game).
    """

    _shared: dict[tuple[str, int, int], Any] = {}

    def __init__(self, max_steps: int,
                 opener: Callable[[Any, int], Engine] | None = None) -> None:
        self.max_steps = max_steps
        self.opener = opener
        """``opener(game, max_steps)``: a new engine (the environment's
        :meth:`~.envs.base.LocalEnvironment.open_engine`; None: ALFWorld's)."""

    def engine(self, game: GameRecord, slot: int = 0) -> Any:
        """The engine of ``game`` in ``slot`` (opened if needed)."""
        key = (str(game.gamefile), self.max_steps, slot)
        env = self._shared.get(key)
        if env is None:
            env = (AlfworldEnv([game], max_steps=self.max_steps) if self.opener is None
                   else self.opener(game, self.max_steps))
            self._shared[key] = env
        return env


@dataclass
class Timer:
    """Seconds (wall clock) spent in the engine and in the policy, and environment steps.

    ``policy`` is the sum of ``forward`` (the rollouts' and evaluations' policy passes:
    prompts, forward, sampling), ``reference``, ``estimator``, ``update`` (the PPO update)
    and ``warm_start``.
    """

    env: float = 0.0
    policy: float = 0.0
    env_steps: int = 0
    forward: float = 0.0
    reference: float = 0.0
    estimator: float = 0.0
    update: float = 0.0
    warm_start: float = 0.0

    def snapshot(self) -> Timer:
        """A copy of the current figures."""
        return dataclasses.replace(self)

    def __sub__(self, other: Timer) -> Timer:
        return Timer(**{f.name: getattr(self, f.name) - getattr(other, f.name)
                        for f in dataclasses.fields(self)})

    def policy_parts(self) -> list[tuple[str, float]]:
        """``(name, seconds)`` of the parts of ``policy``."""
        return [("rollout forwards", self.forward), ("reference forward", self.reference),
                ("estimator", self.estimator), ("PPO update", self.update),
                ("warm start", self.warm_start)]

    def add(self, part: str, seconds: float) -> None:
        """Count ``seconds`` of policy time in ``part`` (a field name above)."""
        setattr(self, part, getattr(self, part) + seconds)
        self.policy += seconds


def play(policy: Scorer, pool: EnginePool, games: Sequence[GameRecord],
         task_uids: Sequence[str], rollouts: Sequence[int], temperature: float,
         rng: np.random.Generator | Sequence[np.random.Generator], prompts: PromptSettings,
         timer: Timer, slots: Sequence[int] | None = None,
         logits_cache: dict[tuple[TurnInput, ...], torch.Tensor] | None = None
         ) -> list[Episode]:
    """Play one episode per ``games[i]`` (rollout index ``rollouts[i]``), all in lockstep.

    Episode ``i`` runs on engine slot ``slots[i]`` of its game (default: its rollout
    index); the (game, slot) pairs must be distinct. Actions are sampled at
    ``temperature`` with ``rng`` (one draw per live episode per turn, in list order; or
    one generator per episode, each its own); the policy runs without gradients.

    ``logits_cache``: see :func:`_pick`.
    """
    slots = list(rollouts) if slots is None else list(slots)
    keys = [(str(g.gamefile), s) for g, s in zip(games, slots, strict=True)]
    if len(set(keys)) != len(keys):
        raise ValueError("play() needs distinct (game, slot) pairs (one engine each)")
    episodes = [Episode(g, u, r) for g, u, r in zip(games, task_uids, rollouts, strict=True)]
    engines = [pool.engine(g, s) for g, s in zip(games, slots, strict=True)]
    obs: list[str] = []
    adm: list[tuple[str, ...]] = []
    t0 = time.perf_counter()
    for env in engines:
        start = env.reset(0)
        obs.append(start.observation)
        adm.append(start.admissible)
    timer.env += time.perf_counter() - t0
    live = list(range(len(games)))
    histories: list[list[Turn]] = [[] for _ in games]
    with policy.frozen():  # the parameters do not change during the episodes
        while live:
            t0 = time.perf_counter()
            inputs, cands = [], []
            for i in live:
                c = choices(adm[i]) or adm[i]
                inputs.append(policy.encode_turn(games[i].goal, obs[i], c, histories[i], prompts))
                cands.append(c)
            picks, logp = _pick(policy, inputs, temperature, _draws(rng, live, len(games)),
                                logits_cache)
            timer.add("forward", time.perf_counter() - t0)
            t0 = time.perf_counter()
            still = []
            for k, i in enumerate(live):
                turn = TurnRecord(obs[i], adm[i], cands[k], inputs[k], int(picks[k]),
                                  float(logp[k]))
                result = engines[i].step(turn.action)
                turn.valid, turn.reward = result.valid, result.reward
                episodes[i].turns.append(turn)
                histories[i].append(Turn(obs[i], turn.action))
                obs[i], adm[i] = result.observation, result.admissible
                timer.env_steps += 1
                if result.done:
                    episodes[i].won = result.won
                else:
                    still.append(i)
            live = still
            timer.env += time.perf_counter() - t0
    return episodes


def _draws(rng: np.random.Generator | Sequence[np.random.Generator], live: list[int],
           n: int) -> np.random.Generator | list[np.random.Generator]:
    """The generator(s) of a turn's live episodes: the one generator, or theirs."""
    if isinstance(rng, np.random.Generator):
        return rng
    if len(rng) != n:
        raise ValueError(f"{len(rng)} generators for {n} episodes")
    return [rng[i] for i in live]


def _pick(policy: Scorer, inputs: list[TurnInput], temperature: float,
          rng: np.random.Generator | Sequence[np.random.Generator],
          logits_cache: dict[tuple[TurnInput, ...], torch.Tensor] | None
          ) -> tuple[np.ndarray, torch.Tensor]:
    """One action per turn of a lockstep batch: ``(picks (B,) int, log-probs (B,))``.

    ``logits_cache``: the policy's logits of every batch already scored with the same
    parameters (the caller empties it when they change), keyed by the batch's inputs in
    order. A batch met again (the first turn of every rollout round of the same games, or
    rounds that repeat the same moves) is not recomputed: the same batch gives the same
    logits, bit for bit, so this changes nothing but the time.
    """
    with torch.inference_mode():
        key = tuple(inputs)
        logits = None if logits_cache is None else logits_cache.get(key)
        if logits is None:
            logits = policy.score(inputs)
            if logits_cache is not None:
                logits_cache[key] = logits
        picks = sample_actions(logits, temperature, rng)
        logp, _ = chosen_logprobs(logits, torch.from_numpy(picks), temperature)
    return picks, logp


def success_metrics(episodes: Sequence[Episode], prefix: str,
                    task_names: dict[str, str] | None = None) -> dict[str, float]:
    """``<prefix>/success_rate``, per task type ``<prefix>/<task>_success_rate`` and
    ``<prefix>/length/mean`` (turns) of ``episodes``. ``task_names``: task type -> metric
    name (default ALFWorld's; an environment without task types gives {})."""
    out: dict[str, float] = {
        f"{prefix}/success_rate": float(np.mean([e.won for e in episodes])),
        f"{prefix}/length/mean": float(np.mean([len(e.turns) for e in episodes])),
    }
    names = TASK_METRIC_NAMES if task_names is None else task_names
    for task_type, name in names.items():
        won = [e.won for e in episodes if e.game.task_type == task_type]
        if won:
            out[f"{prefix}/{name}_success_rate"] = float(np.mean(won))
    return out


def episode_metrics(episodes: Sequence[Episode], penalty: float,
                    task_names: dict[str, str] | None = None) -> dict[str, float]:
    """verl-agent's training-episode metrics (``episode/...``)."""
    out = success_metrics(episodes, "episode", task_names)
    out["episode/reward/mean"] = float(np.mean(
        [sum(t.reward - penalty * (not t.valid) for t in e.turns) for e in episodes]))
    turns = [t for e in episodes for t in e.turns]
    out["episode/valid_action_ratio"] = float(np.mean([t.valid for t in turns]))
    return out
