"""The rehearsal's Sokoban: which rooms verl-agent will deal, and the expert's turns on them.

On Sokoban a rehearsal needs no game files: verl-agent's ``SokobanEnv`` generates each room
from a seed, and the hooks draw a rollout's seeds under a key of (env seed, split, step)
(:func:`ccpo_lab.backends.verl.agent.patches.patch_sokoban_envs`). :func:`room_seeds`
computes those seeds ahead (the rooms the rehearsal's runs will see), and
:func:`demonstrations` plays each room with the shortest solution
(:func:`ccpo_lab.backends.local.envs.sokoban.solver.solve`) on verl-agent's own
``SokobanEnv``, rendering every turn with verl-agent's own Sokoban templates as its
``SokobanEnvironmentManager`` does: the tiny model is fitted to these turns, as it is to the
planner's plans on ALFWorld. :func:`demonstrations` runs in the trainer environment
(verl-agent's checkout, gym_sokoban); :func:`room_seeds` needs numpy alone.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.backends.verl.agent import seeds as seeds

ACTION_CODE = {"up": 1, "down": 2, "left": 3, "right": 4}
"""verl-agent's ``sokoban_projection`` codes."""
TRAIN_RANGE = (0, 2**16 - 1)
VAL_RANGE = (2**16, 2**32 - 1)
"""The ranges verl-agent's ``SokobanMultiProcessEnv.reset`` draws room seeds from."""


def room_seeds(env_seeds: Sequence[int], steps: int, tasks: int, val_episodes: int
               ) -> list[int]:
    """The room seeds the rehearsal's rollouts will draw: every env seed (one per run seed),
    training steps 0..``steps``+1 (``tasks`` rooms each), evaluations at the same steps
    (``val_episodes`` rooms each), as the patched reset draws them."""
    out: list[int] = []
    for e in env_seeds:
        for step in range(steps + 2):
            for split, n, (low, high) in (("train", tasks, TRAIN_RANGE),
                                          ("val", val_episodes, VAL_RANGE)):
                key = np.asarray(seeds.task_seed(e, split, step, 0), dtype=np.uint32)
                rng = np.random.RandomState(key)
                out += [int(x) for x in rng.randint(low, high, size=n)]
    return sorted(set(out))


def _modules(checkout: Path) -> tuple[Any, Any]:
    """(verl-agent's ``SokobanEnv`` class, its Sokoban prompt templates)."""
    from ccpo_lab.backends.verl.agent.cpu import install_pkg_resources

    install_pkg_resources()
    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    env = importlib.import_module("agent_system.environments.env_package.sokoban.sokoban")
    prompts = importlib.import_module("agent_system.environments.prompts.sokoban")
    return env.SokobanEnv, prompts


def render_prompt(templates: Any, obs: str, history: list[tuple[str, str]],
                  history_length: int) -> str:
    """``SokobanEnvironmentManager.build_text_obs`` (text form) for one turn; ``history``:
    (observation, action as verl-agent stores it: ``Up``) of earlier turns."""
    if not history or history_length <= 0:
        return str(templates.SOKOBAN_TEMPLATE_NO_HIS.format(current_observation=obs))
    recent = history[-history_length:]
    start = len(history) - len(recent)
    lines = [f"[Observation {start + j + 1}: '{o}', Action {start + j + 1}: '{a}']"
             for j, (o, a) in enumerate(recent)]
    return str(templates.SOKOBAN_TEMPLATE.format(
        step_count=len(history), history_length=len(recent),
        action_history="\n".join(lines), current_step=len(history) + 1,
        current_observation=obs))


def demonstrations(checkout: Path, history_length: int, settings: dict[str, Any],
                   room_seed_list: Sequence[int]) -> list[tuple[str, str]]:
    """(prompt text, expert action) of every expert turn of the rooms ``room_seed_list``
    (``settings``: ``dim_room``, ``num_boxes``, ``search_depth``, ``max_steps``), each
    played on verl-agent's ``SokobanEnv`` up to ``max_steps`` turns."""
    from ccpo_lab.backends.local.envs.sokoban.solver import solve

    env_cls, templates = _modules(checkout)
    out: list[tuple[str, str]] = []
    for s in room_seed_list:
        env = env_cls("tiny_rgb_array", dim_room=tuple(settings["dim_room"]),
                      num_boxes=int(settings["num_boxes"]),
                      max_steps=int(settings["max_steps"]),
                      search_depth=int(settings["search_depth"]))
        obs, _ = env.reset(seed=int(s))
        plan = solve(env.room_fixed.tolist(), env.room_state.tolist()) or ()
        history: list[tuple[str, str]] = []
        for action in plan[:int(settings["max_steps"])]:
            out.append((render_prompt(templates, obs, history, history_length), action))
            history.append((obs, action.capitalize()))
            obs, _, done, info = env.step(ACTION_CODE[action])
            if done or info.get("won"):
                break
    if not out:
        raise ValueError("no Sokoban room with a solution among the rehearsal's rooms")
    return out


def template_texts(checkout: Path) -> list[str]:
    """verl-agent's Sokoban templates (their words join the tokenizer's vocabulary)."""
    _, templates = _modules(checkout)
    return [templates.SOKOBAN_TEMPLATE, templates.SOKOBAN_TEMPLATE_NO_HIS]
