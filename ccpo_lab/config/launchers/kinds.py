"""The launcher kinds: ``launcher.kind`` -> its settings class, and its launcher named by a
``"module:Class"`` string that only launching resolves (:mod:`ccpo_lab.launch.registry`).

Loading a sweep needs a kind's settings class only, so it imports no launcher: the
built-in kinds' settings live beside this module (:mod:`.inline`, :mod:`.local`,
:mod:`.slurm`). Other kinds come from the entry points of group :data:`GROUP` (an
installed package's ``toy = toy_launcher:ToyLauncher``; the settings class is that
launcher's ``settings_class``, loaded when a sweep names the kind), or are registered at
run time (:func:`add`, what :func:`ccpo_lab.launch.registry.register` calls).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from ccpo_lab.config.launcher import LauncherSettings, Where
from ccpo_lab.config.launchers.inline import InlineSettings
from ccpo_lab.config.launchers.local import LocalSettings
from ccpo_lab.config.launchers.rayjobs import RayJobsSettings
from ccpo_lab.config.launchers.skypilot import SkyPilotSettings
from ccpo_lab.config.launchers.slurm import SlurmSettings
from ccpo_lab.config.validate import build, field_names
from ccpo_lab.errors import UserError

GROUP = "ccpo_lab.launchers"
"""The entry-point group that adds launchers (each entry: ``kind = module:LauncherClass``)."""

BUILTIN: dict[str, tuple[type[LauncherSettings], str]] = {
    "inline": (InlineSettings, "ccpo_lab.launch.inline:InlineLauncher"),
    "local": (LocalSettings, "ccpo_lab.launch.local:LocalLauncher"),
    "slurm": (SlurmSettings, "ccpo_lab.launch.slurm:SlurmLauncher"),
    "ray-jobs": (RayJobsSettings, "ccpo_lab.launch.rayjobs:RayJobsLauncher"),
    "skypilot": (SkyPilotSettings, "ccpo_lab.launch.skypilot:SkyPilotLauncher"),
}
"""The built-in kinds, in the order the help lists them: settings class, launcher."""

_ADDED: dict[str, Any] = {}
"""Kinds registered at run time -> their launcher class (a test's toy launcher)."""


@functools.cache
def _entry_points() -> dict[str, EntryPoint]:
    """The installed packages' launchers of :data:`GROUP`, by kind (read once)."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def add(kind: str, launcher: Any) -> None:
    """Register ``launcher`` (a class with ``settings_class``) under ``kind``."""
    _ADDED[kind] = launcher


def remove(kind: str) -> None:
    """Forget a kind registered with :func:`add` (nothing if it was not)."""
    _ADDED.pop(kind, None)


def kinds() -> list[str]:
    """Every kind: the built-in ones, those registered at run time, then the installed
    packages' entry points."""
    out = list(BUILTIN) + [k for k in _ADDED if k not in BUILTIN]
    return out + [k for k in _entry_points() if k not in out]


def launcher_target(kind: Any, *, key: str = "launcher.kind",
                    file: str | None = None) -> Any:
    """The launcher of ``kind``: a ``"module:Class"`` string, or the class itself (one
    registered at run time or loaded from its entry point); :class:`UserError` listing the
    kinds when unknown."""
    if isinstance(kind, str):
        if kind in BUILTIN:
            return BUILTIN[kind][1]
        if kind in _ADDED:
            return _ADDED[kind]
        if kind in _entry_points():
            return _entry_points()[kind].load()
    raise UserError("unknown launcher", file=file, key=key, value=kind, valid=kinds())


def settings_class(kind: Any, *, key: str = "launcher.kind",
                   file: str | None = None) -> type[LauncherSettings]:
    """The settings dataclass of ``kind`` (:class:`UserError` listing the kinds when
    unknown)."""
    if isinstance(kind, str) and kind in BUILTIN:
        return BUILTIN[kind][0]
    cls = launcher_target(kind, key=key, file=file).settings_class
    if not (isinstance(cls, type) and issubclass(cls, LauncherSettings)):
        raise UserError(f"launcher {kind!r}: its settings_class is not a LauncherSettings",
                        file=file, key=key, value=kind)
    return cls


def not_a_setting(kind: str, key: str) -> str:
    """Why ``key`` is refused under launcher ``kind`` (it moved, or is another kind's)."""
    moved = settings_class(kind).moved
    if key in moved:
        return f"not a {kind} setting: {moved[key]}"
    every = {n: settings_class(n) for n in kinds()}
    owners = [n for n, c in every.items() if key in field_names(c)]
    if owners:
        return f"a setting of launcher {', '.join(owners)}, not of {kind}"
    keys = {k: n for n, c in reversed(every.items()) for k in field_names(c)}
    close = difflib.get_close_matches(key, sorted(keys), n=1)
    hint = f" (did you mean {close[0]}, a setting of launcher {keys[close[0]]}?)" if close else ""
    return f"unknown key for launcher {kind}{hint}"


def build_settings(data: Mapping[str, Any], *, where: Where) -> LauncherSettings:
    """A sweep's ``launcher`` section (``kind`` and that kind's keys) as the kind's typed
    settings: types and ranges checked; a key of another kind, or one that moved, is an
    error listing the valid keys."""
    if not isinstance(data, Mapping):
        raise UserError("expected a mapping", file=where("launcher"), key="launcher",
                        value=data)
    kind = data.get("kind", "inline")
    settings_cls = settings_class(kind, file=where("launcher.kind"))
    valid = field_names(settings_cls)
    for k in data:
        if k not in valid:
            path = f"launcher.{k}"
            raise UserError(not_a_setting(kind, k), file=where(path), key=path, valid=valid)
    settings = build(settings_cls, {k: v for k, v in data.items() if k != "kind"},
                     key="launcher", where=where)
    settings.validate(where)
    return settings
