"""What a sweep directory holds for its readers (the report, ``verify``, the trackers).

The runs are listed by :class:`~ccpo_lab.runs.layout.SweepDir` (:meth:`~ccpo_lab.runs.
layout.SweepDir.discover`): a run is a ``<sweep_dir>/<arm>/seed-<k>[.<n>]`` directory whose
``run.json`` agrees with its place; any other directory holding a run file is a
:class:`~ccpo_lab.runs.layout.LeftOut`, which the report and ``verify`` name. When one
(arm, seed) has several directories (``seed-0``, ``seed-0.2`` after ``--new-run``, or a
replaced import) the newest (highest ``<n>``) is the one reported, and the report says so.

The manifest ``<sweep_dir>/sweep.json`` (written by the launcher) holds the resolved sweep
configuration; its ``analysis`` section supplies the report's defaults. A directory built
by ``ccpo-lab import`` alone has none: then options or the analysis defaults apply.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.errors import UserError
from ccpo_lab.runs.layout import FoundRun, LeftOut, SweepDir


def check_sweep_dir(sweep_dir: str | Path) -> Path:
    """``sweep_dir`` as a Path; :class:`UserError` if it is not an existing directory."""
    p = Path(sweep_dir)
    if not p.exists():
        raise UserError("sweep directory not found", file=p)
    if not p.is_dir():
        raise UserError("not a directory (expected a sweep directory <results>/<sweep>)", file=p)
    return p


def check_is_sweep(sweep_dir: str | Path) -> Path:
    """``sweep_dir`` when it is a sweep directory (a ``sweep.json``, or at least one
    ``<arm>/seed-<k>`` run); :class:`UserError` before anything is written there
    otherwise (``sync`` on another folder would create its store in it)."""
    p = check_sweep_dir(sweep_dir)
    sd = SweepDir(p)
    if not sd.manifest.exists() and not sd.scan():
        raise UserError("not a sweep directory (no sweep.json and no <arm>/seed-<k> run "
                        "directory): nothing synced, nothing written", file=p)
    return p


def manifest_config(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep's resolved configuration in a manifest.

    Accepts the configuration at the top level or under ``config`` / ``sweep``; returns
    a dict that has at least ``analysis`` and ``tracking`` mappings.
    """
    cfg = dict(doc)
    for key in ("config", "sweep"):
        inner = doc.get(key)
        if "analysis" not in cfg and isinstance(inner, dict):
            cfg = {**inner, **{k: v for k, v in doc.items() if k not in inner and k != key}}
    out = dict(cfg)
    for key in ("analysis", "tracking"):
        if not isinstance(out.get(key), dict):
            out[key] = {}
    return out


def read_sweep_config(sweep_dir: str | Path) -> dict[str, Any]:
    """:func:`manifest_config` of the sweep's manifest (:meth:`SweepDir.read_manifest
    <ccpo_lab.runs.layout.SweepDir.read_manifest>`: {} when absent, :class:`UserError`
    when damaged)."""
    sd = SweepDir(Path(sweep_dir))
    doc = sd.read_manifest()
    return manifest_config(doc) if doc or sd.manifest.exists() else {}


@dataclass(frozen=True)
class SweepRuns:
    """What a sweep directory holds, for the report and ``verify``."""

    root: Path
    """The sweep directory."""
    manifest: dict[str, Any]
    """Its resolved configuration (:func:`read_sweep_config`; {} without a manifest)."""
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
    manifest = read_sweep_config(root)
    newest, left = SweepDir(root).newest()
    if not newest:
        raise UserError("no runs found (expected <arm>/seed-<k>/run.json)", file=root,
                        detail="\n".join(f"  {x.text}" for x in left) or None)
    return SweepRuns(root, manifest, newest, arm_order(manifest, {a for a, _ in newest}),
                     tuple(left))


def arm_order(manifest: Mapping[str, Any], arms_found: set[str] | list[str]) -> list[str]:
    """Arms in the manifest's order, then any others found, alphabetically."""
    listed = [a for a in manifest.get("arms", []) if isinstance(a, str)]
    ordered = [a for a in listed if a in arms_found]
    return ordered + sorted(set(arms_found) - set(ordered))
