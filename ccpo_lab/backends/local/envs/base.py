"""What the CPU backend asks of an environment (:class:`LocalEnvironment`).

The trainer, the rollouts, the warm start, the checkpoints and ``ccpo-lab evaluate`` only
go through this protocol; an environment's package (``envs/<name>/``) implements it and one
line of :data:`ccpo_lab.backends.local.envs.ENVIRONMENTS` names it. A game set is any
object with ``root`` (its folder: ``root.name`` identifies it in checkpoints), ``train`` and
``eval`` (sequences of games); a game any object with ``split``, ``index``, ``task_type``,
``goal`` (the task text), ``gamefile`` (a string or path naming it uniquely: engines and
demonstrations are cached under it) and ``expert_plan`` (a solution, for the warm start).
An engine plays one game: ``reset(0)`` returns an
:class:`~ccpo_lab.backends.local.env.EpisodeStart`, ``step(action)`` a
:class:`~ccpo_lab.backends.local.env.StepResult` (observation, reward, done, won, valid,
admissible actions).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ccpo_lab.backends.eval_contract import EpisodeRange
    from ccpo_lab.backends.local.env import EpisodeStart, StepResult
    from ccpo_lab.config.schema import RunConfig
    from ccpo_lab.evaluation.spec import EvalSetting
    from ccpo_lab.runs.layout import RunDir


class Game(Protocol):
    """One game (an ALFWorld task, a Sokoban room)."""

    @property
    def split(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def task_type(self) -> str: ...
    @property
    def goal(self) -> str: ...
    @property
    def gamefile(self) -> Any: ...
    @property
    def expert_plan(self) -> tuple[str, ...]: ...


class GameSet(Protocol):
    """A run's games: ``train`` and held-out ``eval``, in a folder of their own."""

    @property
    def root(self) -> Path: ...
    @property
    def train(self) -> Sequence[Any]: ...
    @property
    def eval(self) -> Sequence[Any]: ...


class Engine(Protocol):
    """One episode slot of one game."""

    def reset(self, game_index: int) -> EpisodeStart:
        """Start an episode (``game_index`` 0: the engine's game)."""

    def step(self, action: str) -> StepResult:
        """Take ``action``."""


def games_cache(run: RunConfig, rd: RunDir) -> Path:
    """Where generated game sets live: ``backend.local.games_cache`` or ``<results>/.games``."""
    if run.backend.local.games_cache:
        return Path(run.backend.local.games_cache).expanduser()
    return rd.path.resolve().parents[2] / ".games"


class LocalEnvironment(ABC):
    """An environment of the CPU backend (one instance per environment, stateless)."""

    name: str = ""
    """The name sweeps give it (``environments: [...]``)."""
    view: str = ""
    """How the policy's prompt is rendered: ``"module:function"`` with the signature of
    :func:`ccpo_lab.backends.local.prompts.render_segments` ("": ALFWorld's)."""
    required: tuple[tuple[str, str], ...] = ()
    """(module, how to install it) its runs import."""

    @abstractmethod
    def load_games(self, run: RunConfig, rd: RunDir) -> GameSet:
        """The run's game set, generated (seeded) into the cache on first use."""

    @abstractmethod
    def set_key(self, run: RunConfig) -> str:
        """A hash of what determines the run's game set (no file is read)."""

    @abstractmethod
    def open_engine(self, game: Any, max_steps: int) -> Engine:
        """A fresh engine of ``game`` (episodes end after ``max_steps`` steps)."""

    def prepare(self, games: GameSet) -> None:
        """Called once by a trainer before it plays ``games`` (default: nothing)."""
        return None

    @abstractmethod
    def episodes(self, run: RunConfig, split: str) -> EpisodeRange:
        """How many games ``ccpo-lab evaluate`` may play of ``split`` (``in``/``out``)."""

    @abstractmethod
    def split_games(self, run: RunConfig, games: GameSet, split: str, n: int) -> list[Any]:
        """The first ``n`` games of evaluation split ``split`` (``in``: held-out;
        ``out``: out of distribution)."""

    @abstractmethod
    def draw(self, run: RunConfig, setting: EvalSetting) -> dict[str, Any]:
        """What of the game set an evaluation draw depends on (for its key)."""

    def summary(self, run: RunConfig) -> str:
        """A few words on the games (``describe``)."""
        return f"{self.name} games"

    def warm_start(self, run: RunConfig) -> tuple[int, int]:
        """(demonstrations, epochs) of the run's warm start (default ``backend.local``'s)."""
        cfg = run.backend.local
        return cfg.warmstart_demos, cfg.warmstart_epochs

    def task_metric_names(self) -> dict[str, str]:
        """Task type -> metric name (``<prefix>/<name>_success_rate``); {}: none."""
        return {}
