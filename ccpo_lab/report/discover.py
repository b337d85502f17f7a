"""Finding the runs of a sweep directory, and reading its manifest.

A run is any ``<sweep_dir>/<arm>/seed-<k>[.<n>]/run.json``. When one (arm, seed) has
several directories (``seed-0``, ``seed-0.2`` after ``--new-run``, or a replaced import)
the newest (highest ``<n>``) is the one reported, and the report says so.

The manifest ``<sweep_dir>/sweep.json`` (written by the launcher) holds the resolved sweep
configuration; its ``analysis`` section supplies the report's defaults. A directory built
by ``ccpo-lab import`` alone has none: then options or :class:`AnalysisConfig` defaults apply.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.errors import UserError

MANIFEST = "sweep.json"
SEED_DIR_RE = re.compile(r"^seed-(\d+)(?:\.(\d+))?$")


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


def discover_runs(sweep_dir: str | Path) -> list[FoundRun]:
    """Every run directory of the sweep, sorted by (arm, seed, suffix)."""
    from ccpo_lab.runs.layout import RunDir

    root = Path(sweep_dir)
    found: dict[tuple[str, int], list[tuple[int, Path]]] = {}
    for run_json in root.glob(f"*/seed-*/{RunDir(root).run_json.name}"):
        d = run_json.parent
        m = SEED_DIR_RE.match(d.name)
        if m is None or d.parent.name.startswith("."):
            continue
        key = (d.parent.name, int(m.group(1)))
        found.setdefault(key, []).append((int(m.group(2) or 1), d))
    out: list[FoundRun] = []
    for (arm, seed), dirs in sorted(found.items()):
        dirs.sort()
        names = tuple(p.name for _, p in dirs)
        out.extend(FoundRun(arm, seed, p, n, names) for n, p in dirs)
    return out


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
    p = Path(sweep_dir) / MANIFEST
    if not p.is_file():
        return {}
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
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


def load_sweep_runs(
    sweep_dir: str | Path,
) -> tuple[Path, dict[str, Any], dict[tuple[str, int], FoundRun], list[str]]:
    """``(root, manifest, newest run of each (arm, seed), arms in order)`` of a sweep dir.

    Raises :class:`UserError` when the directory holds no run.
    """
    root = check_sweep_dir(sweep_dir)
    manifest = read_manifest(root)
    newest = newest_runs(discover_runs(root))
    if not newest:
        raise UserError("no runs found (expected <arm>/seed-<k>/run.json)", file=root)
    return root, manifest, newest, arm_order(manifest, {a for a, _ in newest})


def arm_order(manifest: dict[str, Any], arms_found: set[str] | list[str]) -> list[str]:
    """Arms in the manifest's order, then any others found, alphabetically."""
    listed = [a for a in manifest.get("arms", []) if isinstance(a, str)]
    ordered = [a for a in listed if a in arms_found]
    return ordered + sorted(set(arms_found) - set(ordered))
