"""The launcher registry: ``launcher.kind`` -> the :class:`~ccpo_lab.launch.base.Launcher`.

Configuration knows each kind by its settings class and a ``"module:Class"`` string
(:mod:`ccpo_lab.config.launchers.kinds`); this module resolves the string when a sweep is
launched, so loading a sweep imports no launcher.

Adding a launcher is one module and one entry point, no edit of ccpo-lab: the module
defines its settings (a frozen :class:`~ccpo_lab.config.launcher.LauncherSettings`
subclass, ``kind`` fixed), its :class:`~ccpo_lab.launch.base.Launcher` subclass
(``kind``, ``settings_class``) and its job environment; the package that ships it declares::

    [project.entry-points."ccpo_lab.launchers"]
    toy = "toy_launcher:ToyLauncher"

``launcher=toy`` then selects it, its settings are validated when the sweep is loaded, and
``status`` / ``cancel`` find its trackers from each run's ``job.json``. A test may instead
:func:`register` a class for its duration.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from ccpo_lab.config.launcher import LauncherSettings
from ccpo_lab.config.launchers import kinds as _kinds
from ccpo_lab.config.launchers.kinds import build_settings, not_a_setting
from ccpo_lab.launch.base import Launcher
from ccpo_lab.placement import Needs, Placement, this_host

__all__ = ["LAUNCHERS", "build_settings", "kinds", "launcher_class", "make_launcher",
           "not_a_setting", "placement_here", "register", "unregister"]


def _resolve(kind: str, target: Any) -> type[Launcher]:
    """The class ``target`` names (``"module:Class"``, or the class itself)."""
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        target = getattr(importlib.import_module(module), attr, None)
    if not (isinstance(target, type) and issubclass(target, Launcher)):
        raise TypeError(f"launcher {kind!r}: {target!r} is not a Launcher subclass")
    return target


def launcher_class(kind: Any, *, key: str = "launcher.kind",
                   file: str | None = None) -> type[Launcher]:
    """The launcher of ``kind``; :class:`UserError` listing the kinds when unknown."""
    return _resolve(kind, _kinds.launcher_target(kind, key=key, file=file))


class _Launchers(Mapping[str, type[Launcher]]):
    """Every launcher, by kind, in the order the help lists them (each class imported
    when it is looked up)."""

    def __getitem__(self, kind: str) -> type[Launcher]:
        if kind not in _kinds.kinds():
            raise KeyError(kind)
        return launcher_class(kind)

    def __iter__(self) -> Iterator[str]:
        return iter(_kinds.kinds())

    def __len__(self) -> int:
        return len(_kinds.kinds())


LAUNCHERS: Mapping[str, type[Launcher]] = _Launchers()
"""Every launcher, by kind (built-in, registered, entry points)."""


def register(cls: type[Launcher]) -> type[Launcher]:
    """Add ``cls`` under ``cls.kind`` (a class decorator; a kind is registered once)."""
    if cls.kind in _kinds.kinds() and launcher_class(cls.kind) is not cls:
        raise ValueError(f"launcher {cls.kind!r} is already registered")
    _kinds.add(cls.kind, cls)
    return cls


def unregister(kind: str) -> None:
    """Remove ``kind`` (tests that registered a toy launcher)."""
    _kinds.remove(kind)


def kinds() -> list[str]:
    """The registered kinds."""
    return _kinds.kinds()


def make_launcher(settings: LauncherSettings, sweep_dir: Any, *, name: str,
                  needs: Needs) -> Launcher:
    """The launcher object of ``settings`` for a sweep's directory and its runs' needs."""
    return launcher_class(settings.kind)(settings, sweep_dir, name=name, needs=needs)


def placement_here() -> Placement:
    """Where this process runs: the placement of the first launcher whose job environment
    it is in (:attr:`Launcher.environment <ccpo_lab.launch.base.Launcher.environment>`),
    else this machine, one task. For code outside a :class:`~ccpo_lab.launch.job.RunJob`
    (a hand-written job script's helpers)."""
    for cls in LAUNCHERS.values():
        if cls.environment.active():
            return cls.environment()
    return this_host()
