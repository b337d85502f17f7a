"""Finding the runs of a sweep directory, and reading its manifest.

A run is a ``<sweep_dir>/<arm>/seed-<k>[.<n>]`` directory whose ``run.json`` agrees with
its place (:meth:`ccpo_lab.runs.layout.SweepDir.scan`); any other directory holding a run
file is a :class:`LeftOut`, which the report and ``verify`` name. When one (arm, seed) has
several directories (``seed-0``, ``seed-0.2`` after ``--new-run``, or a replaced import)
the newest (highest ``<n>``) is the one reported, and the report says so.

The manifest ``<sweep_dir>/sweep.json`` (written by the launcher) holds the resolved sweep
configuration; its ``analysis`` section supplies the report's defaults. A directory built
by ``ccpo-lab import`` alone has none: then options or :class:`AnalysisConfig` defaults apply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.errors import UserError
from ccpo_lab.runs.layout import MANIFEST, SweepDir


@dataclass(frozen=True)
class FoundRun:
    """One run directory of a sweep."""

    arm: str
    """Arm (the parent directory's name)."""
    seed: int
    """Seed (from ``seed-<k>``)."""
    path: Path
    """The run directory."""
    suffix: int
    """``<n>`` of ``seed-<k>.<n>`` (1 for ``seed-<k>``)."""
    siblings: tuple[str, ...] = ()
    """Names of every directory of this (arm, seed), oldest first (itself included)."""

    @property
    def superseded_note(self) -> str | None:
        """One line saying which directory of several is used, or None if it is alone."""
        if len(self.siblings) < 2:
            return None
        return (f"{self.arm} seed {self.seed}: {len(self.siblings)} directories "
                f"({', '.join(self.siblings)}); using the newest, {self.path.name}")


def check_sweep_dir(sweep_dir: str | Path) -> Path:
    """``sweep_dir`` as a Path; :class:`UserError` if it is not an existing directory."""
    p = Path(sweep_dir)
    if not p.exists():
        raise UserError("sweep directory not found", file=p)
    if not p.is_dir():
        raise UserError("not a directory (expected a sweep directory <results>/<sweep>)", file=p)
    return p


@dataclass(frozen=True)
class LeftOut:
    """A directory that holds run files but is not a run of its place."""

    arm: str
    """Its arm directory."""
    seed: int
    """The seed of its name."""
    path: Path
    """The directory."""
    why: str
    """Why it is left out."""

    @property
    def file(self) -> Path:
        """The file at fault (``run.json``)."""
        return self.path / "run.json"

    @property
    def text(self) -> str:
        """One line: which directory, left out, why."""
        return f"{self.arm}/{self.path.name}: left out: {self.why}"


def discover(sweep_dir: str | Path) -> tuple[list[FoundRun], list[LeftOut]]:
    """Every run directory of the sweep, sorted by (arm, seed, suffix), and the directories
    left out (``run.json`` missing, unreadable, or disagreeing with its place)."""
    found: dict[tuple[str, int], list[tuple[int, Path]]] = {}
    left: list[LeftOut] = []
    for p in SweepDir(Path(sweep_dir)).scan():
        seed = p.rd.seed if p.rd.seed is not None else -1
        if p.problem is not None:
            left.append(LeftOut(p.rd.arm, seed, p.rd.path, p.problem))
            continue
        found.setdefault((p.rd.arm, seed), []).append((p.rd.suffix, p.rd.path))
    out: list[FoundRun] = []
    for (arm, seed), dirs in sorted(found.items()):
        dirs.sort()
        names = tuple(p.name for _, p in dirs)
        out.extend(FoundRun(arm, seed, p, n, names) for n, p in dirs)
    return out, left


def discover_runs(sweep_dir: str | Path) -> list[FoundRun]:
    """Every run directory of the sweep (see :func:`discover`), sorted by (arm, seed,
    suffix); directories left out are not among them."""
    return discover(sweep_dir)[0]


def newest_runs(found: list[FoundRun]) -> dict[tuple[str, int], FoundRun]:
    """The newest directory of each (arm, seed)."""
    out: dict[tuple[str, int], FoundRun] = {}
    for r in found:
        cur = out.get((r.arm, r.seed))
        if cur is None or r.suffix > cur.suffix:
            out[(r.arm, r.seed)] = r
    return out


def read_manifest(sweep_dir: str | Path) -> dict[str, Any]:
    """The sweep's resolved configuration from ``sweep.json`` ({} when absent).

    Accepts the configuration at the top level or under ``config`` / ``sweep``; returns
    a dict that has at least ``analysis`` and ``tracking`` mappings when a manifest exists.
    """
    from ccpo_lab.runs.files import RunFileError, read_small

    p = Path(sweep_dir) / MANIFEST
    if not p.is_file() and not p.is_symlink():
        return {}
    try:
        doc = json.loads(read_small(p, sweep_dir))
    except RunFileError as e:
        raise UserError(f"sweep manifest {e.why}", file=p) from None
    except (OSError, ValueError) as e:
        raise UserError(f"unreadable sweep manifest: {e}", file=p) from None
    if not isinstance(doc, dict):
        raise UserError("sweep manifest must be a JSON object", file=p)
    cfg = doc
    for key in ("config", "sweep"):
        inner = doc.get(key)
        if "analysis" not in cfg and isinstance(inner, dict):
            cfg = {**inner, **{k: v for k, v in doc.items() if k not in inner and k != key}}
    out = dict(cfg)
    for key in ("analysis", "tracking"):
        if not isinstance(out.get(key), dict):
            out[key] = {}
    return out


@dataclass(frozen=True)
class SweepRuns:
    """What a sweep directory holds, for the report and ``verify``."""

    root: Path
    """The sweep directory."""
    manifest: dict[str, Any]
    """Its resolved configuration (:func:`read_manifest`; {} without a manifest)."""
    newest: dict[tuple[str, int], FoundRun]
    """The newest directory of each (arm, seed)."""
    arms: list[str]
    """Arms in order (:func:`arm_order`)."""
    left_out: tuple[LeftOut, ...] = ()
    """Directories not used, and why."""


def load_sweep_runs(sweep_dir: str | Path) -> SweepRuns:
    """The runs of a sweep directory (newest of each (arm, seed)) and those left out.

    Raises :class:`UserError` when the directory holds no usable run.
    """
    root = check_sweep_dir(sweep_dir)
    manifest = read_manifest(root)
    found, left = discover(root)
    newest = newest_runs(found)
    if not newest:
        raise UserError("no runs found (expected <arm>/seed-<k>/run.json)", file=root,
                        detail="\n".join(f"  {x.text}" for x in left) or None)
    return SweepRuns(root, manifest, newest, arm_order(manifest, {a for a, _ in newest}),
                     tuple(left))


def arm_order(manifest: dict[str, Any], arms_found: set[str] | list[str]) -> list[str]:
    """Arms in the manifest's order, then any others found, alphabetically."""
    listed = [a for a in manifest.get("arms", []) if isinstance(a, str)]
    ordered = [a for a in listed if a in arms_found]
    return ordered + sorted(set(arms_found) - set(ordered))
