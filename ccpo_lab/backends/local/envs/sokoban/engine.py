"""Sokoban rooms on gym_sokoban's engine (``gym_sokoban==0.0.6``), in verl-agent's text form.

The engine is gym_sokoban's ``SokobanEnv``: its ``step`` moves the player or pushes a box
and gives its rewards (-0.1 a step, +1 a box pushed onto a target, -1 one pushed off, +10
when every box is on a target). We load the room we generated into it (its own ``reset``
would draw a room from numpy's global generator). The observation is the room as text rows,
one symbol a cell (``#`` wall, ``_`` floor, ``O`` target, ``X`` box, ``√`` box on target,
``P`` player, ``S`` player on target), each cell written `` s \\t`` and rows joined by
newlines, as verl-agent's text Sokoban shows it; the admissible actions are the four moves.

``gym_sokoban`` imports ``pkg_resources``, which setuptools 81+ no longer ships: when it is
missing, :func:`sokoban_modules` puts a minimal stand-in in ``sys.modules`` while it imports
gym_sokoban (only the RGB renderers, which ccpo-lab does not call, read files through it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys
import types
from typing import Any

import numpy as np

from ccpo_lab.backends.local.env import EpisodeStart, StepResult
from ccpo_lab.errors import UserError

ACTIONS: tuple[str, ...] = ("up", "down", "left", "right")
"""The admissible actions, in verl-agent's order."""
ACTION_CODE = {"up": 1, "down": 2, "left": 3, "right": 4}
"""Action -> gym_sokoban's action (``push <dir>``: a move when no box is ahead)."""
MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
WALL, FLOOR, TARGET, BOX_ON_TARGET, BOX, PLAYER = 0, 1, 2, 3, 4, 5
"""gym_sokoban's cell codes (``room_state``; ``room_fixed`` holds walls, floor, targets)."""
SYMBOLS = {WALL: "#", FLOOR: "_", TARGET: "O", BOX_ON_TARGET: "√", BOX: "X", PLAYER: "P",
           6: "S"}
"""Cell code -> verl-agent's text symbol (6: the player on a target)."""
INVALID_REWARD = -0.1
"""Reward of an inadmissible action (no move; verl-agent's)."""
TASK = "push every box onto a target"
"""The task text of every room."""


def _pkg_resources_stand_in() -> types.ModuleType | None:
    """A minimal ``pkg_resources`` (``resource_filename`` only), or None where the real
    one is importable."""
    if "pkg_resources" in sys.modules or importlib.util.find_spec("pkg_resources") is not None:
        return None
    stub = types.ModuleType("pkg_resources")

    def resource_filename(package: str, path: str) -> str:
        spec = importlib.util.find_spec(package)
        base = os.path.dirname(spec.origin) if spec and spec.origin else ""
        return os.path.join(base, path)

    stub.resource_filename = resource_filename  # type: ignore[attr-defined]
    return stub


def sokoban_modules() -> tuple[Any, Any]:
    """``(gym_sokoban.envs.room_utils, gym_sokoban.envs.sokoban_env)``, imported quietly
    (gym prints a deprecation notice on import). A ``pkg_resources`` stand-in is in
    ``sys.modules`` during the import only (other code, pytest's among it, takes a
    ``pkg_resources`` there for setuptools')."""
    stub = _pkg_resources_stand_in()
    if stub is not None:
        sys.modules["pkg_resources"] = stub
    try:
        with contextlib.redirect_stderr(io.StringIO()), \
                contextlib.redirect_stdout(io.StringIO()):
            from gym_sokoban.envs import room_utils, sokoban_env
    except ImportError as err:
        raise UserError(f"Sokoban on the CPU backend needs gym_sokoban ({err}): pip install "
                        "'ccpo-lab[local]'", key="environments", value="sokoban") from None
    finally:
        if stub is not None and sys.modules.get("pkg_resources") is stub:
            del sys.modules["pkg_resources"]
    return room_utils, sokoban_env


def render_text(state: np.ndarray, fixed: np.ndarray) -> str:
    """The room as verl-agent's text rows."""
    rows = []
    for r in range(state.shape[0]):
        cells = []
        for c in range(state.shape[1]):
            code = int(state[r, c])
            if code == PLAYER and int(fixed[r, c]) == TARGET:
                code = 6
            cells.append(f" {SYMBOLS[code]} \t")
        rows.append("".join(cells))
    return "\n".join(rows)


class SokobanEngine:
    """One episode slot of one room on gym_sokoban's engine."""

    def __init__(self, room: Any, max_steps: int) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.room = room
        self.max_steps = max_steps
        _, sokoban_env = sokoban_modules()
        fixed = np.array(room.fixed, dtype=np.int64)
        self._env = sokoban_env.SokobanEnv(dim_room=tuple(fixed.shape), max_steps=max_steps,
                                           num_boxes=room.num_boxes, reset=False)
        self._steps = 0
        self._done = True

    def reset(self, game_index: int = 0) -> EpisodeStart:
        """Start an episode of the room (``game_index`` must be 0)."""
        if game_index != 0:
            raise IndexError(f"an engine plays one room, not {game_index}")
        env = self._env
        env.room_fixed = np.array(self.room.fixed, dtype=np.int64)
        env.room_state = np.array(self.room.state, dtype=np.int64)
        env.box_mapping = {}
        env.player_position = np.argwhere(env.room_state == PLAYER)[0]
        env.num_env_steps = 0
        env.reward_last = 0
        env.boxes_on_target = int((env.room_state == BOX_ON_TARGET).sum())
        self._steps, self._done = 0, False
        return EpisodeStart(game_index=0, task_type="sokoban", goal=TASK,
                            observation=self.observation, admissible=ACTIONS, expert_plan=())

    @property
    def observation(self) -> str:
        """The current room as text."""
        return render_text(self._env.room_state, self._env.room_fixed)

    def step(self, action: str) -> StepResult:
        """Take ``action`` (one of :data:`ACTIONS`; any other text is a wasted step)."""
        if self._done:
            raise RuntimeError("step() on a finished episode; call reset() first")
        valid = action.strip() in ACTION_CODE
        self._steps += 1
        if valid:
            _, reward, _, _ = self._env.step(ACTION_CODE[action.strip()],
                                             observation_mode="tiny_rgb_array")
        else:
            reward = INVALID_REWARD
        won = bool(self._env._check_if_all_boxes_on_target())
        self._done = won or self._steps >= self.max_steps
        return StepResult(observation=self.observation, reward=float(reward), done=self._done,
                          won=won, valid=valid, admissible=ACTIONS, steps=self._steps,
                          expert_plan=())

    @property
    def done(self) -> bool:
        """Whether the episode is over."""
        return self._done
