"""The launcher registry: ``launcher.kind`` -> the :class:`~ccpo_lab.launch.base.Launcher`.

Adding a launcher is one module (its settings dataclass, its ``Launcher`` subclass and its
``placement_here``) plus one line in :data:`LAUNCHERS` (or :func:`register` from outside
the package, as a test does with a toy launcher).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from ccpo_lab.config.launcher import LauncherSettings, Where
from ccpo_lab.config.validate import build, field_names
from ccpo_lab.errors import UserError
from ccpo_lab.launch.base import Launcher
from ccpo_lab.launch.inline import InlineLauncher
from ccpo_lab.launch.local import LocalLauncher
from ccpo_lab.launch.slurm import SlurmLauncher
from ccpo_lab.placement import Needs, Placement, this_host

LAUNCHERS: dict[str, type[Launcher]] = {
    "inline": InlineLauncher,
    "local": LocalLauncher,
    "slurm": SlurmLauncher,
}
"""Every launcher, by kind, in the order the help lists them."""


def register(cls: type[Launcher]) -> type[Launcher]:
    """Add ``cls`` under ``cls.kind`` (a class decorator; a kind is registered once)."""
    if cls.kind in LAUNCHERS and LAUNCHERS[cls.kind] is not cls:
        raise ValueError(f"launcher {cls.kind!r} is already registered")
    LAUNCHERS[cls.kind] = cls
    return cls


def unregister(kind: str) -> None:
    """Remove ``kind`` (tests that registered a toy launcher)."""
    LAUNCHERS.pop(kind, None)


def kinds() -> list[str]:
    """The registered kinds."""
    return list(LAUNCHERS)


def launcher_class(kind: str, *, key: str = "launcher.kind",
                   file: str | None = None) -> type[Launcher]:
    """The launcher of ``kind``; :class:`UserError` listing the kinds when unknown."""
    try:
        return LAUNCHERS[kind]
    except (KeyError, TypeError):
        raise UserError("unknown launcher", file=file, key=key, value=kind,
                        valid=kinds()) from None


def not_a_setting(kind: str, key: str) -> str:
    """Why ``key`` is refused under launcher ``kind`` (it moved, or is another kind's)."""
    moved = launcher_class(kind).settings_class.moved
    if key in moved:
        return f"not a {kind} setting: {moved[key]}"
    owners = [n for n, c in LAUNCHERS.items() if key in field_names(c.settings_class)]
    if owners:
        return f"a setting of launcher {', '.join(owners)}, not of {kind}"
    keys = {k: n for n, c in reversed(LAUNCHERS.items()) for k in field_names(c.settings_class)}
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
    cls = launcher_class(kind, file=where("launcher.kind"))
    settings_cls = cls.settings_class
    valid = field_names(settings_cls)
    for k in data:
        if k not in valid:
            path = f"launcher.{k}"
            raise UserError(not_a_setting(kind, k), file=where(path), key=path, valid=valid)
    settings = build(settings_cls, {k: v for k, v in data.items() if k != "kind"},
                     key="launcher", where=where)
    settings.validate(where)
    return settings


def make_launcher(settings: LauncherSettings, sweep_dir: Any, *, name: str,
                  needs: Needs) -> Launcher:
    """The launcher object of ``settings`` for a sweep's directory and its runs' needs."""
    return launcher_class(settings.kind)(settings, sweep_dir, name=name, needs=needs)


def placement_here() -> Placement:
    """Where this process runs: the placement of the first launcher whose job environment
    it is in (:meth:`Launcher.detect <ccpo_lab.launch.base.Launcher.detect>`), else this
    machine, one task. For code outside a :class:`~ccpo_lab.launch.job.RunJob` (a
    hand-written job script's helpers)."""
    for cls in LAUNCHERS.values():
        found = cls.detect()
        if found is not None:
            return found
    return this_host()
