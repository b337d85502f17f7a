"""The CPU backend's environments by name, each imported on first use.

Adding an environment is its package ``envs/<name>/`` (a
:class:`~ccpo_lab.backends.local.envs.base.LocalEnvironment`) and one line of
:data:`ENVIRONMENTS` (or :func:`register`, as the tests do); the sweep-level settings
(``env.<name>``) live in :mod:`ccpo_lab.config.environments`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ccpo_lab.errors import UserError

if TYPE_CHECKING:
    from ccpo_lab.backends.local.envs.base import LocalEnvironment

ENVIRONMENTS: dict[str, str] = {
    "alfworld": "ccpo_lab.backends.local.envs.alfworld:ALFWORLD",
    "sokoban": "ccpo_lab.backends.local.envs.sokoban:SOKOBAN",
}
"""Environment name -> ``"module:attribute"`` of its :class:`LocalEnvironment`."""


def register(name: str, target: str) -> None:
    """Add (or replace) environment ``name``: ``target`` is ``"module:attribute"``."""
    ENVIRONMENTS[name] = target


def get_environment(name: str) -> LocalEnvironment:
    """The environment ``name`` (its module imported now)."""
    if name not in ENVIRONMENTS:
        raise UserError("the local backend has no such environment", key="environments",
                        value=name, valid=sorted(ENVIRONMENTS))
    module, _, attr = ENVIRONMENTS[name].partition(":")
    env: LocalEnvironment = getattr(importlib.import_module(module), attr)
    return env


def environment_of(run: Any) -> LocalEnvironment:
    """The environment a run plays (``run.environment``; ALFWorld when it has none)."""
    return get_environment(str(getattr(run, "environment", None) or "alfworld"))
