"""The setup hook of an evaluation's trainer: the run's hooks, plus one that records episodes.

:func:`setup` is the ``worker_process_setup_hook`` of the commands
:mod:`ccpo_lab.backends.verl.evaluate` builds. It installs the run's hooks
(:func:`ccpo_lab.backends.verl.agent.hooks.setup`, unchanged) and, where
``CCPO_LAB_EVAL_EPISODES`` names a file, wraps
``agent_system.environments.env_manager.AlfWorldEnvironmentManager.success_evaluator``
(right after that module is imported, in whichever process imports it: the TaskRunner
that drives the validation loop) so that each call appends one line per environment to
the file (:func:`episode_records`): the worker index, its game (from ALFWorld's
``extra.gamefile``), whether it won, its reward (the sum of its step rewards), its turns
and its inadmissible actions. verl-agent's validation calls it once per validation batch,
with every episode's step infos.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ccpo_lab.backends.verl.agent import hooks as verl_agent_hooks

ENV_EVAL_EPISODES = "CCPO_LAB_EVAL_EPISODES"
"""The file the episodes of the evaluation go to."""
TARGET = "agent_system.environments.env_manager"
PATCHED = "__ccpo_lab_eval_patched__"
DATA_MARK = "json_2.1.1/"


def game_id(gamefile: str) -> str:
    """``valid_seen/<task dir>/<trial>`` of an ALFWorld game file path."""
    text = str(gamefile).replace(os.sep, "/")
    if DATA_MARK in text:
        text = text.split(DATA_MARK, 1)[1]
    return text.removesuffix("/game.tw-pddl")


def task_type(gamefile: str) -> str:
    """The task type of an ALFWorld game (its task folder's name up to the first ``-``)."""
    parts = game_id(gamefile).split("/")
    folder = parts[-2] if len(parts) >= 2 else parts[-1]
    return folder.split("-", 1)[0]


def episode_records(total_infos: Sequence[Sequence[dict[str, Any]]],
                    total_batch_list: Sequence[Sequence[dict[str, Any]]],
                    episode_rewards: Sequence[float], episode_lengths: Sequence[float]
                    ) -> list[dict[str, Any]]:
    """One record per environment of a rollout, as ``success_evaluator`` receives it.

    The episode's outcome is its last active step's ``info['won']`` (what verl-agent's
    ``_process_batch`` counts), its game the ``extra.gamefile`` of its infos.
    """
    out = []
    for i, (infos, items) in enumerate(zip(total_infos, total_batch_list, strict=True)):
        active = [k for k, item in enumerate(items) if item.get("active_masks")]
        last = active[-1] if active else len(items) - 1
        info = infos[last] if infos else {}
        gamefile = next((x.get("extra.gamefile") for x in infos if x.get("extra.gamefile")),
                        None)
        invalid = sum(1 for k in active if not bool(items[k].get("is_action_valid", True)))
        out.append({"worker": i, "game": game_id(gamefile) if gamefile else f"worker-{i}",
                    "task_type": task_type(gamefile) if gamefile else "unknown",
                    "success": bool(float(info.get("won", 0.0)) > 0),
                    "reward": float(episode_rewards[i]), "turns": int(episode_lengths[i]),
                    "invalid": int(invalid)})
    return out


def patch_env_manager(mod: ModuleType) -> None:
    """Wrap ``AlfWorldEnvironmentManager.success_evaluator`` (see the module docstring)."""
    cls = mod.AlfWorldEnvironmentManager
    orig = cls.success_evaluator

    def success_evaluator(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig(self, *args, **kwargs)
        path = os.environ.get(ENV_EVAL_EPISODES)
        if path:
            rows = episode_records(kwargs["total_infos"], kwargs["total_batch_list"],
                                   list(kwargs["episode_rewards"]),
                                   list(kwargs["episode_lengths"]))
            with Path(path).open("a", encoding="utf-8") as f:
                f.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
                f.flush()
                os.fsync(f.fileno())
        return out

    success_evaluator.__wrapped__ = orig  # type: ignore[attr-defined]
    cls.success_evaluator = success_evaluator


def _apply(module: ModuleType) -> None:
    if getattr(module, PATCHED, False):
        return
    setattr(module, PATCHED, True)
    patch_env_manager(module)


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _apply(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Patches :data:`TARGET` right after it is imported."""

    def find_spec(self, fullname: str, path: Any = None, target: ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def setup() -> None:
    """The run's hooks, and the episode recorder where the variable names a file."""
    verl_agent_hooks.setup()
    if not os.environ.get(ENV_EVAL_EPISODES):
        return
    if TARGET in sys.modules:
        _apply(sys.modules[TARGET])
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
