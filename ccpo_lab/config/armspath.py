"""Where arm files and example sweeps are found: the arms search path and the shipped files.

An arm name is looked up along the arms path, first match wins:

1. the sweep's ``arms_dir`` (relative to the sweep file), or the ``arms/`` beside the
   sweep's folder (a project laid out as ``arms/`` + ``sweeps/``), or ``--arms-dir``;
2. each folder of ``$CCPO_LAB_ARMS`` (``os.pathsep``-separated);
3. ``./arms`` when it exists;
4. the arms shipped with ccpo-lab (``ccpo_lab/shipped/arms``).

``extends: X`` looks ``X`` up along the same path, so a user's arm can extend a shipped
one; an arm that extends its own name (``gigpo.yaml`` with ``extends: gigpo``) extends
the next one of that name on the path. Folders that resolve to the same place count once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ccpo_lab.errors import UserError

SHIPPED = Path(__file__).resolve().parents[1] / "shipped"
"""The arms and example sweeps installed with the package."""
SHIPPED_ARMS = SHIPPED / "arms"
SHIPPED_SWEEPS = SHIPPED / "sweeps"
ENV = "CCPO_LAB_ARMS"


@dataclass(frozen=True)
class ArmsPath:
    """The arms search path: ``(folder, where it came from)``, first match wins."""

    entries: tuple[tuple[Path, str], ...]

    @property
    def dirs(self) -> tuple[Path, ...]:
        return tuple(d for d, _ in self.entries)

    def find_all(self, name: str) -> list[Path]:
        """``(K,)`` the files ``<dir>/<name>.yaml`` along the path, the winner first."""
        return [d / f"{name}.yaml" for d in self.dirs if (d / f"{name}.yaml").is_file()]

    def find(self, name: str, after: Path | None = None) -> Path | None:
        """The first ``<name>.yaml`` on the path (after the file ``after``: the next one of
        that name, for an arm that extends its own name)."""
        found = self.find_all(name)
        if after is not None:
            later = [i for i, p in enumerate(found) if p.resolve() == after.resolve()]
            found = found[later[0] + 1:] if later else []
        return found[0] if found else None

    def names(self) -> list[str]:
        """Every arm name on the path, sorted."""
        return sorted({p.stem for d in self.dirs for p in d.glob("*.yaml")
                       if not p.name.startswith(".")})

    def source(self, path: Path) -> str:
        """Where the folder holding ``path`` came from (``CCPO_LAB_ARMS``, ``shipped``...)."""
        for d, why in self.entries:
            if path.parent.resolve() == d.resolve():
                return why
        return "?"

    def describe(self) -> str:
        """One line: the folders in order."""
        return " -> ".join(f"{d} ({why})" for d, why in self.entries)


def arms_path(first: Path | None = None, first_source: str = "--arms-dir",
              cwd: Path | None = None) -> ArmsPath:
    """The arms path with ``first`` (the sweep's or the command's folder) in front.

    Raises :class:`UserError` (exit 2) when ``first`` or an entry of ``$CCPO_LAB_ARMS``
    is not a folder, naming it and where it came from.
    """
    entries: list[tuple[Path, str]] = []
    if first is not None:
        entries.append((_folder(first, first_source), first_source))
    for part in (os.environ.get(ENV) or "").split(os.pathsep):
        if part.strip():
            entries.append((_folder(Path(part), f"${ENV}"), f"${ENV}"))
    here = (cwd or Path.cwd()) / "arms"
    if here.is_dir():
        entries.append((here, "./arms"))
    entries.append((SHIPPED_ARMS, "shipped"))
    seen: set[Path] = set()
    unique = []
    for d, why in entries:
        key = d.resolve()
        if key not in seen:
            seen.add(key)
            unique.append((d, why))
    return ArmsPath(tuple(unique))


def _folder(path: Path, source: str) -> Path:
    if not path.is_dir():
        what = "does not exist" if not path.exists() else "is not a folder"
        raise UserError(f"arms folder {what} (the arms path: the sweep's arms_dir, "
                        f"${ENV}, ./arms, then the shipped arms)", file=path, key=source)
    return path


def shipped_sweep(path: str | Path) -> Path | None:
    """The shipped example sweep a missing ``path`` names (``demo``, ``demo.yaml``,
    ``sweeps/demo.yaml``), or None."""
    p = Path(path)
    if p.exists() or p.is_absolute() or len(p.parts) > 2 or \
            (len(p.parts) == 2 and p.parts[0] != "sweeps"):
        return None
    name = p.name if p.suffix == ".yaml" else f"{p.name}.yaml"
    candidate = SHIPPED_SWEEPS / name
    return candidate if candidate.is_file() else None


def shipped_sweep_names() -> list[str]:
    """The shipped example sweeps' names, sorted."""
    return sorted(p.stem for p in SHIPPED_SWEEPS.glob("*.yaml"))
