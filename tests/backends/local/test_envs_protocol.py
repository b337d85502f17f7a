"""Adding an environment to the CPU backend is one package and one registry line.

The toy environment below (a corridor: walk right to its end) is written as a package of
its own in a temporary folder, registered with one line, and trained and evaluated by the
unchanged trainer: nothing else of the backend knows it.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from ccpo_lab.backends.local import envs
from tests.backends.local.test_trainer import tiny_runs

TOY = '''
"""A corridor of four cells: start at 0, "right" moves on, "left" back; reach 3."""
from dataclasses import dataclass
from pathlib import Path

from ccpo_lab.backends.eval_contract import EpisodeRange
from ccpo_lab.backends.local.env import EpisodeStart, StepResult
from ccpo_lab.backends.local.envs.base import LocalEnvironment, games_cache

ACTIONS = ("left", "right")


@dataclass(frozen=True)
class Corridor:
    split: str
    index: int
    length: int
    gamefile: str
    task_type: str = "corridor"
    goal: str = "walk to the end of the corridor"

    @property
    def expert_plan(self):
        return ("right",) * (self.length - 1)


@dataclass(frozen=True)
class Corridors:
    root: Path
    train: tuple
    eval: tuple


class Engine:
    def __init__(self, game, max_steps):
        self.game, self.max_steps = game, max_steps

    def reset(self, game_index=0):
        self.pos, self.steps = 0, 0
        return EpisodeStart(0, "corridor", self.game.goal, "you are at 0", ACTIONS, ())

    def step(self, action):
        self.steps += 1
        self.pos = max(0, self.pos + (1 if action == "right" else -1))
        won = self.pos == self.game.length - 1
        done = won or self.steps >= self.max_steps
        return StepResult(f"you are at {self.pos}", 10.0 * won, done, won, True, ACTIONS,
                          self.steps, ())


class Toy(LocalEnvironment):
    name = "toy"

    def load_games(self, run, rd):
        root = games_cache(run, rd) / "toy"
        make = lambda split, i: Corridor(split, i, 3 + i % 2, f"{root}#{split}/{i}")
        return Corridors(root, tuple(make("train", i) for i in range(4)),
                         tuple(make("valid_seen", i) for i in range(2)))

    def set_key(self, run):
        return "toy"

    def open_engine(self, game, max_steps):
        return Engine(game, max_steps)

    def episodes(self, run, split):
        return EpisodeRange(2, 1, 2, "the toy's two rooms")

    def split_games(self, run, games, split, n):
        return list(games.eval[:n])

    def draw(self, run, setting):
        return {"game_set": "toy"}


TOY = Toy()
'''


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    pkg = tmp_path / "pkgs" / "toy_env"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(TOY))
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    monkeypatch.setitem(envs.ENVIRONMENTS, "toy", "toy_env:TOY")  # the registry line
    return "toy"


def test_the_registry_imports_an_environment_on_first_use(toy: str) -> None:
    env = envs.get_environment(toy)
    assert env.name == "toy" and envs.get_environment("alfworld").name == "alfworld"
    with pytest.raises(Exception, match="no such environment"):
        envs.get_environment("chess")


def test_the_trainer_runs_a_new_environment_unchanged(toy: str, tmp_path: Path) -> None:
    from ccpo_lab.backends.local.runner import load_games
    from ccpo_lab.backends.local.trainer import Trainer

    (tmp_path / "sweeps").mkdir()
    run, rd = tiny_runs(tmp_path, tmp_path / "cache", steps=2)[("grpo", 0)]
    run = dataclasses.replace(run, environment=toy)
    games = load_games(run, rd)
    trainer = Trainer(run, games)
    stats = trainer.initialise()  # the warm start replays the toy's expert plans
    assert stats["warmstart/demo_turns"] > 0
    row = trainer.train_step()
    assert 0.0 <= row["episode/success_rate"] <= 1.0
    val = trainer.evaluate(1)
    assert set(val) == {"val/success_rate", "val/length/mean"}  # no task-type columns
