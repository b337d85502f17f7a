"""The real ALFWorld text engine over generated games, one episode per slot.

Each slot is the wrapper stack ALFWorld's ``AlfredTWEnv.init_env`` builds (TextWorld's
``PddlEnv`` under ``Limit``, ``AlfredDemangler`` without shuffling, ``AlfredInfos`` and, when
asked, ``AlfredExpert`` with the fast-downward planner), loaded with the game file WE pick:
which game a slot plays is decided by the caller's index or explicit generator, never by
TextWorld's internal game iterator or any global random state.

Reward follows verl-agent's ALFWorld environment: ``10 * won`` (so 10 on the step that
reaches the goal, 0 otherwise); an episode ends when won or after ``max_steps`` steps
(invalid actions count as steps and leave the state unchanged: "Nothing happens.").
``textworld`` and ``alfworld`` are imported lazily.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ccpo_lab.backends.local import speedups

if TYPE_CHECKING:
    from ccpo_lab.backends.local.games import GameRecord, GameSet

SUCCESS_REWARD = 10.0
"""Reward on the step that wins (verl-agent: ``10.0 * float(info['won'])``)."""


@contextlib.contextmanager
def keep_argv() -> Iterator[None]:
    """Restore ``sys.argv``, which fast-downward's PDDL translator overwrites on every
    load and reset (it sets ``['translate.py', 'domain', 'task']``)."""
    saved = list(sys.argv)
    try:
        yield
    finally:
        sys.argv[:] = saved


def open_engine(gamefile: str, *, max_steps: int | None = None, expert: bool = False,
                fast: bool = True) -> Any:
    """A loaded (not yet reset) ALFWorld TextWorld environment for ``gamefile``.

    ``expert=True`` adds ALFWorld's planner expert (``infos['extra.expert_plan']``), which
    replans with fast-downward on every step (about 10 ms a step). ``fast=True`` installs
    the engine's parse cache (:mod:`ccpo_lab.backends.local.speedups`; same output).
    """
    if fast:

        speedups.install()
    import textworld
    from alfworld.agents.environment.alfred_tw_env import (
        AlfredDemangler,
        AlfredExpert,
        AlfredExpertType,
        AlfredInfos,
    )
    from textworld.envs import PddlEnv
    from textworld.envs.wrappers import Limit

    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    env: Any = PddlEnv(infos)
    if max_steps:
        env = Limit(env, max_episode_steps=max_steps)
    env = AlfredDemangler(env, shuffle=False)
    env = AlfredInfos(env)
    if expert:
        env = AlfredExpert(env, expert_type=AlfredExpertType.PLANNER)
    with keep_argv():
        env.load(gamefile)
    return env


@dataclass(frozen=True)
class EpisodeStart:
    """What an agent sees when an episode starts."""

    game_index: int
    task_type: str
    goal: str
    """The task description (the text after ``Your task is to:``, without the final dot)."""
    observation: str
    admissible: tuple[str, ...]
    """Admissible commands, sorted (as the engine returns them)."""
    expert_plan: tuple[str, ...]
    """The planner's plan from here (empty unless the slot was built with ``expert=True``)."""


@dataclass(frozen=True)
class StepResult:
    """The outcome of one action."""

    observation: str
    reward: float
    done: bool
    won: bool
    valid: bool
    """Whether the action was among the admissible commands before the step."""
    admissible: tuple[str, ...]
    steps: int
    """Steps taken in this episode so far (this one included)."""
    expert_plan: tuple[str, ...]


class AlfworldEnv:
    """One episode slot on the real engine over a fixed list of generated games.

    The loaded game is kept between episodes: resetting to the same game skips parsing
    (about 0.12 s); a different game is loaded into the same engine.
    """

    def __init__(self, games: Sequence[GameRecord], *, max_steps: int = 50,
                 expert: bool = False, fast: bool = True) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        if not games:
            raise ValueError("no games to play")
        self.games = tuple(games)
        self.max_steps = max_steps
        self.expert = expert
        self.fast = fast
        self._env: Any = None
        self._lib: Any = None
        """The fast-downward library copy of the running episode (speed-ups only)."""
        self._loaded: int | None = None
        self._admissible: tuple[str, ...] = ()
        self._steps = 0
        self._done = True
        self.game_index: int | None = None

    def reset(self, game_index: int) -> EpisodeStart:
        """Start an episode of game ``game_index`` (an index into ``games``)."""
        if not 0 <= game_index < len(self.games):
            raise IndexError(f"game index {game_index} out of range 0..{len(self.games) - 1}")
        record = self.games[game_index]
        lend: Any = contextlib.nullcontext()
        if self.fast:  # a library copy from the process's pool (see speedups)

            speedups.install()
            if self._lib is None:
                self._lib = speedups.acquire_lib()
            lend = speedups.lending(self._lib)
        if self._env is None:
            with lend:
                self._env = open_engine(str(record.gamefile), max_steps=self.max_steps,
                                        expert=self.expert, fast=self.fast)
            self._loaded = game_index
        if self._lib is not None:
            self._env.unwrapped.downward_lib = self._lib
        with keep_argv():
            if self._loaded != game_index:
                self._env.load(str(record.gamefile))
            self._loaded = game_index
            state = self._env.reset()
        self.game_index = game_index
        self._steps = 0
        self._done = False
        self._admissible = tuple(state["admissible_commands"])
        return EpisodeStart(game_index=game_index, task_type=record.task_type, goal=record.goal,
                            observation=state.feedback, admissible=self._admissible,
                            expert_plan=self._plan(state))

    def step(self, action: str) -> StepResult:
        """Take ``action`` (any text; inadmissible text is a wasted step)."""
        if self._done:
            raise RuntimeError("step() on a finished episode; call reset() first")
        valid = action.strip() in self._admissible
        state, _score, done = self._env.step(action)
        self._steps += 1
        won = bool(state["won"])
        self._done = bool(done) or won or self._steps >= self.max_steps
        self._admissible = tuple(state["admissible_commands"])
        if self._done and self._lib is not None:

            speedups.release_lib(self._lib)
            self._lib = None
        return StepResult(observation=state.feedback, reward=SUCCESS_REWARD if won else 0.0,
                          done=self._done, won=won, valid=valid, admissible=self._admissible,
                          steps=self._steps, expert_plan=self._plan(state))

    @property
    def done(self) -> bool:
        """Whether the current episode is over (or none was started)."""
        return self._done

    @property
    def admissible(self) -> tuple[str, ...]:
        """The admissible commands in the current state."""
        return self._admissible

    def _plan(self, state: Any) -> tuple[str, ...]:
        return tuple(state.get("extra.expert_plan") or ()) if self.expert else ()


class AlfworldEnvPool:
    """``n_envs`` episode slots over one split of a :class:`GameSet`, stepped in lockstep.

    Slots run one after another in this process (the engine is pure Python; see the report
    on throughput). Which game each slot plays is the caller's choice: pass indices to
    :meth:`reset`, or draw them with :meth:`sample_games` and an explicit generator.
    """

    def __init__(self, game_set: GameSet, split: str = "train", *, n_envs: int = 1,
                 max_steps: int = 50, expert: bool = False, fast: bool = True) -> None:
        if n_envs < 1:
            raise ValueError(f"n_envs must be >= 1, got {n_envs}")
        self.games = game_set.split(split)
        self.envs = [AlfworldEnv(self.games, max_steps=max_steps, expert=expert, fast=fast)
                     for _ in range(n_envs)]

    @property
    def n_games(self) -> int:
        """Games in this split."""
        return len(self.games)

    def sample_games(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """Game indices drawn uniformly with replacement; shape ``(n,)`` (default n_envs)."""
        size = len(self.envs) if n is None else n
        return rng.integers(0, len(self.games), size=size)

    def reset(self, game_indices: Sequence[int] | np.ndarray) -> list[EpisodeStart]:
        """Start one episode per slot; ``game_indices`` has shape ``(n_envs,)``."""
        if len(game_indices) != len(self.envs):
            raise ValueError(f"need {len(self.envs)} game indices, got {len(game_indices)}")
        return [env.reset(int(i)) for env, i in zip(self.envs, game_indices, strict=True)]

    def step(self, actions: Sequence[str | None]) -> list[StepResult | None]:
        """One action per slot (``None`` for a finished slot, which then returns ``None``)."""
        if len(actions) != len(self.envs):
            raise ValueError(f"need {len(self.envs)} actions, got {len(actions)}")
        out: list[StepResult | None] = []
        for env, action in zip(self.envs, actions, strict=True):
            if action is None:
                if not env.done:
                    raise ValueError("None action for a running episode")
                out.append(None)
            else:
                out.append(env.step(action))
        return out

    @property
    def done(self) -> list[bool]:
        """Whether each slot's episode is over; length ``n_envs``."""
        return [env.done for env in self.envs]
